"""Every S3 bucket the stack creates blocks public access and is encrypted, and nothing in the stack makes it public.

The artifacts bucket holds the fine-tuned model, its checkpoints and the staged data (issue 24); a public one would
publish a private data set and the weights trained on it. What each bucket of the stack needs, as pulumi-aws 7 splits
a bucket into resources of their own:
- a BucketPublicAccessBlock with all four settings true. Together they make any public policy or ACL inert, whenever
  it was set: BlockPublicAcls and BlockPublicPolicy refuse new public ones, IgnorePublicAcls and RestrictPublicBuckets
  neutralise existing ones (S3 API reference, PublicAccessBlockConfiguration). The provider's default for each is
  false (pulumi_aws/s3/bucket_public_access_block.py), so an unset one is a false one;
- a BucketServerSideEncryptionConfiguration with a default encryption algorithm (S3 encrypts new objects with SSE-S3
  even without one since January 2023, but only the stated configuration is something the pack can see and a reviewer
  can read);
- no BucketPolicy statement that allows Principal "*" without a condition that pins the caller, and no BucketAcl (or
  inline acl, grants or policy on the Bucket) granting to everyone or to every AWS user.

A configuration resource names its bucket by the bucket's id, which a first preview does not know. It is matched to
the bucket through the engine's property dependencies of its `bucket` input (the Output it was built from), which a
preview has for every resource; where its `bucket` is a known string, also by the bucket's name. A configuration that
matches no bucket of the stack is about a bucket outside it (artifacts.bucket, used as is), which the pack cannot see.

Fails closed like the other mandatory policies: a setting unknown during the preview is "not checked". A bucket
policy or ACL whose content is unknown (a policy document built from the bucket's ARN is, on a first preview) is
judged by the bucket's public access block: with all four settings known true S3 makes it inert, so it passes;
otherwise the block's own violation stands and the document is reported as not checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policy.props import StackResource, get, has_unknown, is_unknown, not_checked, policy_document

BUCKET = "aws:s3/bucket:Bucket"
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
# The four settings, as the engine names the inputs of pulumi-aws's BucketPublicAccessBlock.
PUBLIC_ACCESS_SETTINGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
# Canned ACLs that grant to the AllUsers or AuthenticatedUsers group (S3 user guide, "Access control list (ACL)
# overview", Canned ACL): authenticated-read is every AWS account in the world, so public too.
PUBLIC_CANNED_ACLS = frozenset({"public-read", "public-read-write", "authenticated-read"})
PUBLIC_GRANTEE_URIS = frozenset(
    {"http://acs.amazonaws.com/groups/global/AllUsers", "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"}
)
# Condition keys that make a statement for Principal "*" non-public when given fixed values (S3 user guide, "The
# meaning of 'public'"): the caller is pinned to an account, organisation, network or source resource.
RESTRICTING_CONDITION_KEYS = frozenset(
    key.lower()
    for key in (
        "aws:SourceArn",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "aws:SourceAccount",
        "aws:SourceOwner",
        "aws:SourceIp",
        "aws:PrincipalOrgID",
        "aws:PrincipalAccount",
        "aws:PrincipalArn",
        "aws:userid",
        "s3:DataAccessPointArn",
        "s3:DataAccessPointAccount",
    )
)
# Operators whose values match callers other than the fixed ones named (a wildcard, a negation, a key that may be
# absent): a condition written with them does not pin the caller.
LOOSE_OPERATOR_PARTS = ("like", "not", "ifexists")


@dataclass(frozen=True)
class BucketParts:
    """A bucket of the stack and the configuration resources that name it."""

    bucket: StackResource
    access_blocks: list[StackResource]
    encryptions: list[StackResource]
    policies: list[StackResource]
    acls: list[StackResource]


def bucket_label(bucket: StackResource) -> str:
    """How a message names a bucket: its resource name, and its S3 name where the preview knows it."""
    name = bucket.urn.rsplit("::", 1)[-1]
    s3_name = get(bucket.props, "bucket")
    return f"bucket {name!r} ({s3_name})" if isinstance(s3_name, str) and s3_name != name else f"bucket {name!r}"


def names_bucket(config: StackResource, bucket: StackResource) -> bool:
    """Whether a configuration resource is about this bucket: its `bucket` input built from the bucket's output, or
    the bucket's name written out."""
    if bucket.urn in config.property_dependencies.get("bucket", ()):
        return True
    name = get(config.props, "bucket")
    return isinstance(name, str) and name == get(bucket.props, "bucket")


def bucket_parts(resources: Sequence[StackResource]) -> list[BucketParts]:
    buckets = [r for r in resources if r.type == BUCKET]

    def of(bucket: StackResource, type_token: str) -> list[StackResource]:
        return [r for r in resources if r.type == type_token and names_bucket(r, bucket)]

    return [
        BucketParts(b, of(b, PUBLIC_ACCESS_BLOCK), of(b, ENCRYPTION), of(b, BUCKET_POLICY), of(b, BUCKET_ACL))
        for b in buckets
    ]


def access_block_violations(label: str, blocks: Sequence[StackResource]) -> list[str]:
    if not blocks:
        return [
            f"{label} has no BucketPublicAccessBlock; give it one with {', '.join(PUBLIC_ACCESS_SETTINGS)} all true"
        ]
    problems = []
    for block in blocks:
        unknown = [s for s in PUBLIC_ACCESS_SETTINGS if is_unknown(get(block.props, s))]
        off = [s for s in PUBLIC_ACCESS_SETTINGS if get(block.props, s) is not True and s not in unknown]
        if off:
            problems.append(
                f"{label}: its public access block leaves {', '.join(off)} not true (unset is false); set all four "
                "true so no policy or ACL can make it public"
            )
        if unknown:
            problems.append(
                not_checked(
                    f"{label}: {', '.join(unknown)} of its public access block is unknown during this preview",
                    "give the four settings the literal value true",
                )
            )
    return problems


def fully_blocked(blocks: Sequence[StackResource]) -> bool:
    """Whether a public access block with all four settings known true covers the bucket."""
    return any(all(get(b.props, s) is True for s in PUBLIC_ACCESS_SETTINGS) for b in blocks)


def encryption_violations(label: str, configurations: Sequence[StackResource]) -> list[str]:
    if not configurations:
        return [
            f"{label} has no BucketServerSideEncryptionConfiguration; give it one whose rule's "
            "applyServerSideEncryptionByDefault names an sseAlgorithm (AES256 or aws:kms)"
        ]
    algorithms = [
        get(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm")
        for c in configurations
        for rule in _items(get(c.props, "rules"))
    ]
    if any(isinstance(a, str) and a for a in algorithms):
        return []
    if any(is_unknown(get(c.props, "rules")) for c in configurations) or any(is_unknown(a) for a in algorithms):
        return [
            not_checked(
                f"{label}: the sseAlgorithm of its server-side encryption configuration is unknown during this preview",
                "name the algorithm with a literal value",
            )
        ]
    return [f"{label}: its server-side encryption configuration names no sseAlgorithm; set AES256 or aws:kms"]


def public_statements(document: Mapping[str, Any]) -> list[str]:
    """The Sids (or positions) of the statements that allow anyone: Effect Allow, Principal "*" (or {"AWS": "*"}),
    and no condition that pins the caller to fixed values of a restricting key."""
    found = []
    for index, statement in enumerate(_items(get(document, "Statement"))):
        if not isinstance(statement, Mapping) or statement.get("Effect") != "Allow":
            continue
        if _everyone(statement.get("Principal")) and not _pins_the_caller(statement.get("Condition")):
            found.append(str(statement.get("Sid") or f"statement {index}"))
    return found


def _everyone(principal: Any) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, Mapping):
        return any("*" in _items(value) for value in principal.values())
    return False


def _pins_the_caller(condition: Any) -> bool:
    if not isinstance(condition, Mapping):
        return False
    for operator, clauses in condition.items():
        if not isinstance(clauses, Mapping) or any(p in str(operator).lower() for p in LOOSE_OPERATOR_PARTS):
            continue
        for key, values in clauses.items():
            fixed = [v for v in _items(values) if isinstance(v, str) and "*" not in v and "?" not in v]
            if str(key).lower() in RESTRICTING_CONDITION_KEYS and fixed and len(fixed) == len(_items(values)):
                return True
    return False


def policy_document_violations(label: str, where: str, document: Any, blocked: bool) -> list[str]:
    """A bucket policy document (a JSON string, as pulumi-aws takes it, or an object)."""
    try:
        parsed = policy_document(document)
    except json.JSONDecodeError:
        return [f"{label}: {where} is not JSON, so whether it makes the bucket public cannot be read"]
    if is_unknown(parsed):
        return [] if blocked else [_unknown_content(label, where)]
    if parsed is None:
        return []
    public = public_statements(parsed) if isinstance(parsed, Mapping) else []
    return (
        [
            f'{label}: {where} allows Principal "*" without a condition that pins the caller ({", ".join(public)}); '
            "grant the job's role by ARN instead"
        ]
        if public
        else []
    )


def acl_violations(label: str, where: str, acl: Any, grants: Any, blocked: bool) -> list[str]:
    """A canned ACL and explicit grants (a BucketAcl's accessControlPolicy.grants, or a Bucket's inline grants)."""
    if is_unknown(acl) or is_unknown(grants) or has_unknown(grants):
        return [] if blocked else [_unknown_content(label, where)]
    problems = []
    if isinstance(acl, str) and acl in PUBLIC_CANNED_ACLS:
        problems.append(f"{label}: {where} is the public canned ACL {acl!r}; use private (the default)")
    uris = {get(g, "grantee", "uri") for g in _items(grants)} | {get(g, "uri") for g in _items(grants)}
    public = sorted(u for u in uris if u in PUBLIC_GRANTEE_URIS)
    if public:
        problems.append(f"{label}: {where} grants to {', '.join(public)}; grant no group of all users")
    return problems


def _unknown_content(label: str, where: str) -> str:
    return not_checked(
        f"{label}: {where} is unknown during this preview and no public access block with all four settings true "
        "makes it inert",
        "block public access on the bucket (all four settings literal true)",
    )


def public_grant_violations(parts: BucketParts) -> list[str]:
    label, blocked, inline = bucket_label(parts.bucket), fully_blocked(parts.access_blocks), parts.bucket.props
    problems = policy_document_violations(label, "its inline policy", get(inline, "policy"), blocked)
    problems += acl_violations(label, "its inline acl", get(inline, "acl"), get(inline, "grants"), blocked)
    for policy in parts.policies:
        problems += policy_document_violations(label, "its BucketPolicy", get(policy.props, "policy"), blocked)
    for acl in parts.acls:
        grants = get(acl.props, "accessControlPolicy", "grants")
        problems += acl_violations(label, "its BucketAcl", get(acl.props, "acl"), grants, blocked)
    return problems


def bucket_violations(parts: BucketParts) -> list[str]:
    label = bucket_label(parts.bucket)
    return [
        *access_block_violations(label, parts.access_blocks),
        *encryption_violations(label, parts.encryptions),
        *public_grant_violations(parts),
    ]


def s3_bucket_stack_violations(resources: Sequence[StackResource]) -> list[tuple[str, str]]:
    """(bucket urn, message) for every bucket of the stack that could be public or is not encrypted."""
    return [(parts.bucket.urn, m) for parts in bucket_parts(resources) for m in bucket_violations(parts)]


def _items(value: Any) -> list[Any]:
    """A policy element that may be one value or a list of them, as a list (IAM accepts both)."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return [] if value is None else [value]
