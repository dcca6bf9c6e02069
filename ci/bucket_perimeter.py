"""The resource control policy that holds the stacks' buckets to this account: AWS itself refuses every request to a
bucket named like a stack's (ARTIFACTS_BUCKET_PREFIX*) and its objects from a principal of another account, whatever
the bucket's policy says.

Why: the deploy role must write the artifacts bucket's policy (s3:PutBucketPolicy, for the TLS-only policy of
infra/artifacts.py), and IAM cannot look inside the document it writes: S3 offers no condition key over a policy's
content (the Service Authorization Reference lists for PutBucketPolicy only s3:authType, s3:ResourceAccount,
s3:signatureAge, s3:signatureversion, s3:TlsVersion and s3:x-amz-content-sha256). Tag conditions do not narrow it
either: S3 honours aws:ResourceTag on a bucket only once ABAC is enabled on that bucket (PutBucketAbac; Amazon S3 user
guide, "Enabling ABAC in general purpose buckets"), and a kept bucket carries the same stack tag as a live one. So a
deploy session could put a policy granting another account on any such bucket, a kept one included; the policy pack
refuses that in the reviewed plan (policy/s3_grants.py), and this policy makes such a grant inert in AWS.

What an RCP may say (AWS Organizations user guide, "RCP syntax"): Effect Deny only (Allow is reserved for
RCPFullAWSAccess, attached everywhere once RCPs are enabled), Principal "*", Action, Resource or NotResource,
Condition; no NotPrincipal, no NotAction. It applies to the resources of the accounts it is attached to, whoever asks,
and not to the management account's resources ("Resource control policies"). The conditions follow AWS's data
perimeter examples (aws-samples/data-perimeter-policy-examples, resource_control_policies/identity_perimeter_rcp.json,
the EnforceOrgIdentities and EnforceConfusedDeputyProtection statements), with this account in place of the
organization:
- a principal whose aws:PrincipalAccount is not this account is denied, unless it is an AWS service principal
  (aws:PrincipalIsAWSService true); BoolIfExists and StringNotEqualsIfExists also deny an anonymous request, which
  carries neither key (IAM user guide, "AWS global condition context keys", each key's Availability);
- an AWS service principal is denied when it acts for another account (aws:SourceAccount, present when a service
  acts on behalf of a resource's owner); services that pass no source account are left to the bucket's policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci.deploy_policy import Account

RCP_NAME = "fsdp-eks-stack-buckets"
RCP_FILE = "stack-buckets-rcp.json"
RCP_TYPE = "RESOURCE_CONTROL_POLICY"  # Organizations' PolicyType (botocore organizations service-2.json)
ANALYZER_NAME = "fsdp-eks-external-access"


def stack_bucket_resources(account: Account) -> list[str]:
    """The stacks' buckets and every object in them."""
    return [account.stack_buckets, f"{account.stack_buckets}/*"]


def bucket_perimeter_policy(account: Account) -> dict[str, Any]:
    resources = stack_bucket_resources(account)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StackBucketsOnlyForThisAccountsPrincipals",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {
                    "StringNotEqualsIfExists": {"aws:PrincipalAccount": account.account_id},
                    "BoolIfExists": {"aws:PrincipalIsAWSService": "false"},
                },
            },
            {
                "Sid": "StackBucketsOnlyForServicesActingForThisAccount",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {
                    "StringNotEquals": {"aws:SourceAccount": account.account_id},
                    "Null": {"aws:SourceAccount": "false"},
                    "Bool": {"aws:PrincipalIsAWSService": "true"},
                },
            },
        ],
    }


def bucket_perimeter_commands(account: Account, out: Path) -> list[str]:
    """Run in the organization's management account (or its delegated administrator for policies): enable the policy
    type once, create the policy, attach it to the account the stacks deploy to (Organizations API: EnablePolicyType
    takes the root's id, CreatePolicy answers Policy.PolicySummary.Id, AttachPolicy a policy and a target id)."""
    root = "$(aws organizations list-roots --query 'Roots[0].Id' --output text)"
    created = (
        f"$(aws organizations create-policy --type {RCP_TYPE} --name {RCP_NAME} "
        f"--description 'fsdp-eks stack buckets: principals of {account.account_id} only' "
        f"--content file://{out}/{RCP_FILE} --query Policy.PolicySummary.Id --output text)"
    )
    return [
        f"aws organizations enable-policy-type --root-id {root} --policy-type {RCP_TYPE}"
        "   # once per organization; skip if enabled",
        f"aws organizations attach-policy --target-id {account.account_id} --policy-id {created}",
    ]


def without_organizations_command() -> str:
    """Where no RCP can hold (no organization, only consolidated billing, or the stacks in the management account):
    an IAM Access Analyzer with the account as its zone of trust reports, after the fact, any bucket whose policy
    grants outside the account; it prevents nothing."""
    return f"aws accessanalyzer create-analyzer --analyzer-name {ANALYZER_NAME} --type ACCOUNT"
