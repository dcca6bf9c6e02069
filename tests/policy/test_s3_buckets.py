"""Every S3 bucket of the stack blocks public access, is encrypted and is granted to no one in particular; its
configuration resources are found through the Output their `bucket` input came from, so a first preview (the bucket's
id unknown) is judged like an update; what cannot be seen is "not checked", never a pass."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policy.props import NOT_CHECKED, UNKNOWN, StackResource
from policy.s3_buckets import (
    BUCKET,
    BUCKET_ACL,
    BUCKET_POLICY,
    ENCRYPTION,
    PUBLIC_ACCESS_BLOCK,
    PUBLIC_ACCESS_SETTINGS,
    public_statements,
    s3_bucket_stack_violations,
)
from tests.harness.mock_runner import UNKNOWN_MARKER
from tests.policy.engine import analyze_view
from tests.policy.engine_view import AnalyzedResource, engine_props

COMPONENT = "urn:pulumi:dev::fsdp-eks::fsdp-eks:infra:ArtifactsBucket::artifacts"
BUCKET_URN = f"urn:pulumi:dev::fsdp-eks::fsdp-eks:infra:ArtifactsBucket${BUCKET}::artifacts"
S3_NAME = "fsdp-eks-dev-artifacts-abc1234"
DENY_INSECURE_TRANSPORT = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{S3_NAME}", f"arn:aws:s3:::{S3_NAME}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ],
}


def _urn(type_token: str, name: str) -> str:
    return f"urn:pulumi:dev::fsdp-eks::fsdp-eks:infra:ArtifactsBucket${type_token}::{name}"


def _part(type_token: str, name: str, props: dict[str, Any], bucket: Any = UNKNOWN) -> StackResource:
    """A configuration resource whose `bucket` is the bucket's id: unknown on a first preview, and its property
    dependency the bucket, as the engine records an Output input."""
    return StackResource(
        type_token,
        _urn(type_token, name),
        {"bucket": bucket, **props},
        parent=COMPONENT,
        dependencies=(BUCKET_URN,),
        property_dependencies={"bucket": (BUCKET_URN,)},
    )


def compliant_bucket(bucket_id: Any = UNKNOWN, policy: Any = None) -> list[StackResource]:
    """The artifacts bucket as the stack builds it (a first preview by default: the bucket's id unknown)."""
    return [
        StackResource(BUCKET, BUCKET_URN, {"bucket": S3_NAME, "tags": {"fsdp-eks:stack": "dev"}}, parent=COMPONENT),
        _part(PUBLIC_ACCESS_BLOCK, "artifacts-public-access", dict.fromkeys(PUBLIC_ACCESS_SETTINGS, True), bucket_id),
        _part(
            ENCRYPTION,
            "artifacts-encryption",
            {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
            bucket_id,
        ),
        _part(
            BUCKET_POLICY, "artifacts-tls-only", {"policy": policy or json.dumps(DENY_INSECURE_TRANSPORT)}, bucket_id
        ),
    ]


def _replaced(resources: list[StackResource], type_token: str, props: dict[str, Any]) -> list[StackResource]:
    return [StackResource(r.type, r.urn, {**r.props, **props}, r.parent, r.dependencies, r.property_dependencies)
            if r.type == type_token else r for r in resources]  # fmt: skip


def _without(resources: list[StackResource], type_token: str) -> list[StackResource]:
    return [r for r in resources if r.type != type_token]


def _messages(resources: list[StackResource]) -> list[str]:
    found = s3_bucket_stack_violations(resources)
    assert all(urn == BUCKET_URN for urn, _ in found), found  # every violation is reported on the bucket
    return [message for _, message in found]


def _public_policy(**statement: Any) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                DENY_INSECURE_TRANSPORT["Statement"][0],
                {
                    "Sid": "PublicRead",
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:GetObject",
                    "Resource": f"arn:aws:s3:::{S3_NAME}/*",
                    **statement,
                },
            ],
        }
    )


@pytest.mark.parametrize("bucket_id", [UNKNOWN, S3_NAME], ids=["first-preview", "update"])
def test_the_stacks_bucket_passes(bucket_id: Any) -> None:
    assert _messages(compliant_bucket(bucket_id)) == []


def test_a_bucket_without_a_public_access_block_fails_naming_the_bucket() -> None:
    (message,) = _messages(_without(compliant_bucket(), PUBLIC_ACCESS_BLOCK))
    assert "'artifacts'" in message and S3_NAME in message and "no BucketPublicAccessBlock" in message


@pytest.mark.parametrize("setting", PUBLIC_ACCESS_SETTINGS)
def test_each_public_access_setting_left_false_fails(setting: str) -> None:
    (message,) = _messages(_replaced(compliant_bucket(), PUBLIC_ACCESS_BLOCK, {setting: False}))
    assert "'artifacts'" in message and setting in message


def test_an_unset_public_access_setting_counts_as_false() -> None:
    resources = [
        StackResource(r.type, r.urn, {k: v for k, v in r.props.items() if k != "ignorePublicAcls"}, r.parent,
                      r.dependencies, r.property_dependencies) if r.type == PUBLIC_ACCESS_BLOCK else r
        for r in compliant_bucket()
    ]  # fmt: skip
    (message,) = _messages(resources)
    assert "ignorePublicAcls" in message


def test_a_public_access_block_of_another_bucket_does_not_count() -> None:
    other = StackResource(
        PUBLIC_ACCESS_BLOCK,
        _urn(PUBLIC_ACCESS_BLOCK, "other"),
        {"bucket": "someone-elses-bucket", **dict.fromkeys(PUBLIC_ACCESS_SETTINGS, True)},
    )
    (message,) = _messages([*_without(compliant_bucket(), PUBLIC_ACCESS_BLOCK), other])
    assert "no BucketPublicAccessBlock" in message


def test_a_configuration_naming_the_bucket_by_its_literal_name_counts() -> None:
    resources = [
        StackResource(r.type, r.urn, {**r.props, "bucket": S3_NAME}) if r.type != BUCKET else r
        for r in compliant_bucket()
    ]
    assert _messages(resources) == []


def test_a_bucket_without_encryption_fails_naming_the_bucket() -> None:
    (message,) = _messages(_without(compliant_bucket(), ENCRYPTION))
    assert "'artifacts'" in message and "no BucketServerSideEncryptionConfiguration" in message


def test_an_encryption_rule_without_an_algorithm_fails() -> None:
    (message,) = _messages(_replaced(compliant_bucket(), ENCRYPTION, {"rules": [{"bucketKeyEnabled": True}]}))
    assert "names no sseAlgorithm" in message


def test_a_public_bucket_policy_fails_naming_the_bucket_and_the_statement() -> None:
    (message,) = _messages(compliant_bucket(policy=_public_policy()))
    assert "'artifacts'" in message and "PublicRead" in message and "Principal" in message


def test_a_public_policy_fails_even_behind_a_full_public_access_block() -> None:
    """S3 would refuse it at `pulumi up` (BlockPublicPolicy): the preview says so first."""
    assert len(_messages(compliant_bucket(policy=_public_policy()))) == 1


@pytest.mark.parametrize(
    "principal", ["*", {"AWS": "*"}, {"AWS": ["arn:aws:iam::123456789012:root", "*"]}], ids=["star", "aws", "list"]
)
def test_every_way_of_writing_everyone_is_public(principal: Any) -> None:
    assert public_statements(json.loads(_public_policy(Principal=principal))) == ["PublicRead"]


def test_a_statement_pinned_to_the_organisation_is_not_public() -> None:
    condition = {"StringEquals": {"aws:PrincipalOrgID": "o-abc123"}}
    assert public_statements(json.loads(_public_policy(Condition=condition))) == []


@pytest.mark.parametrize(
    "condition",
    [
        {"StringLike": {"aws:PrincipalOrgID": "o-*"}},
        {"StringEquals": {"aws:PrincipalOrgID": "o-*"}},
        {"StringNotEquals": {"aws:SourceVpc": "vpc-1"}},
        {"StringEqualsIfExists": {"aws:SourceVpc": "vpc-1"}},
        {"Bool": {"aws:SecureTransport": "true"}},
    ],
    ids=["like", "wildcard", "negated", "if-exists", "unrestricting-key"],
)
def test_a_condition_that_does_not_pin_the_caller_keeps_the_statement_public(condition: dict[str, Any]) -> None:
    assert public_statements(json.loads(_public_policy(Condition=condition))) == ["PublicRead"]


def test_a_policy_for_a_named_role_is_not_public() -> None:
    principal = {"AWS": "arn:aws:iam::123456789012:role/fsdp-eks/job"}
    assert public_statements(json.loads(_public_policy(Principal=principal))) == []


@pytest.mark.parametrize("acl", ["public-read", "public-read-write", "authenticated-read"])
def test_a_public_canned_bucket_acl_fails(acl: str) -> None:
    resources = [*compliant_bucket(), _part(BUCKET_ACL, "artifacts-acl", {"acl": acl})]
    (message,) = _messages(resources)
    assert "'artifacts'" in message and acl in message


def test_an_acl_grant_to_all_users_fails() -> None:
    grant = {
        "grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
        "permission": "READ",
    }
    acl = _part(BUCKET_ACL, "artifacts-acl", {"accessControlPolicy": {"grants": [grant], "owner": {"id": "x"}}})
    (message,) = _messages([*compliant_bucket(), acl])
    assert "AllUsers" in message


def test_a_private_canned_acl_passes() -> None:
    assert _messages([*compliant_bucket(), _part(BUCKET_ACL, "artifacts-acl", {"acl": "private"})]) == []


def test_an_inline_public_acl_on_the_bucket_fails() -> None:
    (message,) = _messages(_replaced(compliant_bucket(), BUCKET, {"acl": "public-read"}))
    assert "inline acl" in message


def test_a_policy_unknown_during_preview_passes_behind_a_full_public_access_block() -> None:
    """The deny-non-TLS policy is built from the bucket's ARN: a first preview cannot read it, and S3 makes any public
    statement in it inert (BlockPublicPolicy refuses it, RestrictPublicBuckets neutralises it)."""
    assert _messages(compliant_bucket(policy=UNKNOWN)) == []


def test_a_policy_unknown_during_preview_without_the_block_is_not_checked() -> None:
    resources = _replaced(compliant_bucket(policy=UNKNOWN), PUBLIC_ACCESS_BLOCK, {"restrictPublicBuckets": False})
    messages = _messages(resources)
    assert len(messages) == 2 and any(m.startswith(NOT_CHECKED) and "BucketPolicy" in m for m in messages)


def test_an_unknown_public_access_setting_is_not_checked() -> None:
    (message,) = _messages(_replaced(compliant_bucket(), PUBLIC_ACCESS_BLOCK, {"blockPublicPolicy": UNKNOWN}))
    assert message.startswith(NOT_CHECKED) and "blockPublicPolicy" in message


def test_an_unknown_encryption_algorithm_is_not_checked() -> None:
    rules = [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": UNKNOWN}}]
    (message,) = _messages(_replaced(compliant_bucket(), ENCRYPTION, {"rules": rules}))
    assert message.startswith(NOT_CHECKED)


def test_a_stack_without_a_bucket_has_nothing_to_check() -> None:
    """An existing bucket (artifacts.bucket) is not the stack's: the pack cannot see it and does not judge it."""
    assert s3_bucket_stack_violations([]) == []


def _analyzed(resource: StackResource) -> AnalyzedResource:
    props = engine_props({k: UNKNOWN_MARKER if v is UNKNOWN else v for k, v in resource.props.items()})
    return AnalyzedResource(
        resource.type,
        resource.urn,
        resource.urn.rsplit("::", 1)[-1],
        props,
        props,
        resource.parent,
        resource.dependencies,
        dict(resource.property_dependencies),
    )


def test_the_pack_reports_a_missing_block_through_the_engine_on_the_bucket() -> None:
    """Through the SDK's proxies, with the bucket's id as the engine's unknown sentinel."""
    assert [v for v in analyze_view([_analyzed(r) for r in compliant_bucket()]) if v.policy.startswith("s3")] == []
    found = [
        v
        for v in analyze_view([_analyzed(r) for r in _without(compliant_bucket(), PUBLIC_ACCESS_BLOCK)])
        if v.policy == "s3-bucket-private-and-encrypted"
    ]
    assert [(v.urn, "no BucketPublicAccessBlock" in v.message) for v in found] == [(BUCKET_URN, True)]
