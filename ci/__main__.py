"""Write the documents a maintainer applies once, and print the commands that apply them.

    python -m ci --repository OWNER/REPO --account-id 123456789012 --reviewer Team:1234 --pulumi-org ORG --out build/ci
    python -m ci ... --owner-id 1111 --repository-id 2222   # repositories with immutable OIDC subject claims

Nothing here calls AWS or GitHub: read the documents, then run the printed `aws iam` and `gh api` commands with an
administrator's credentials, and the `aws organizations` ones in the organization's management account. docs/ci.md
explains each step.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ci.bucket_perimeter import (
    RCP_FILE,
    bucket_perimeter_commands,
    bucket_perimeter_policy,
    without_organizations_command,
)
from ci.deploy_policy import Account, deploy_policy
from ci.environment import Reviewer, api_paths, branch_policy, environment_settings
from ci.github_oidc import (
    AUDIENCE,
    ISSUER_URL,
    Repository,
    deploy_subjects,
    preview_subjects,
    subject_customization,
    trust_policy,
)
from ci.preview_policy import preview_policy
from ci.pulumi_oidc import DEPLOY_TEAM, PREVIEW_TEAM, oidc_policies
from ci.role_boundary import role_boundary
from trainer.base.s3.uri import bucket_name_problem

DEPLOY_SESSION_SECONDS = 7200  # the deploy job's role-duration-seconds; a first `up` creates a cluster


def documents(repository: Repository, account: Account, reviewers: list[Reviewer]) -> dict[str, dict[str, Any]]:
    """File name -> JSON document."""
    return {
        "preview-role-trust.json": trust_policy(account.account_id, preview_subjects(repository), account.partition),
        "preview-role-policy.json": preview_policy(),
        "deploy-role-trust.json": trust_policy(account.account_id, deploy_subjects(repository), account.partition),
        "deploy-role-policy.json": deploy_policy(account),
        "role-boundary-policy.json": role_boundary(account.account_id, account.partition, account.data_buckets),
        RCP_FILE: bucket_perimeter_policy(account),
        "pulumi-up-environment.json": environment_settings(reviewers),
        "pulumi-up-branch-policy.json": branch_policy(),
    }


def pipeline_documents(repository: Repository, pulumi_org: str, preview_team: str, deploy_team: str) -> dict[str, Any]:
    """The repository's OIDC subject template and the Pulumi Cloud issuer's policies for the same subjects."""
    return {
        "oidc-subject-customization.json": subject_customization(),
        "pulumi-oidc-policies.json": oidc_policies(repository, pulumi_org, preview_team, deploy_team),
    }


def commands(repository: Repository, account: Account, out: Path) -> list[str]:
    environment, branches = api_paths(f"{repository.owner}/{repository.name}")
    return [
        f"aws iam create-open-id-connect-provider --url {ISSUER_URL} --client-id-list {AUDIENCE}"
        "   # once per account; skip if it exists",
        f"aws iam create-policy --policy-name {account.boundary_policy} --policy-document file://{out}/role-boundary-policy.json",
        f"aws iam create-role --role-name {account.preview_role} --assume-role-policy-document file://{out}/preview-role-trust.json",
        f"aws iam put-role-policy --role-name {account.preview_role} --policy-name preview --policy-document file://{out}/preview-role-policy.json",
        f"aws iam create-role --role-name {account.deploy_role} --max-session-duration {DEPLOY_SESSION_SECONDS} "
        f"--assume-role-policy-document file://{out}/deploy-role-trust.json",
        f"aws iam put-role-policy --role-name {account.deploy_role} --policy-name deploy --policy-document file://{out}/deploy-role-policy.json",
        f"gh api -X PUT {environment} --input {out}/pulumi-up-environment.json",
        f"gh api -X POST {branches} --input {out}/pulumi-up-branch-policy.json",
        # Last: GitHub's tokens take the new subjects at once, so the roles' trust and Pulumi Cloud's policies
        # (pulumi_cloud_step) must admit them first (GitHub docs, "OpenID Connect reference", Customizing the
        # subject claims).
        f"gh api -X PUT repos/{repository.full_name}/actions/oidc/customization/sub "
        f"--input {out}/oidc-subject-customization.json",
    ]


def organization_step(account: Account, out: Path) -> list[str]:
    """The stacks' buckets held to this account by a resource control policy (ci/bucket_perimeter.py)."""
    return [
        f"# in the organization's management account: no principal outside {account.account_id} reaches the stacks' "
        f"buckets ({account.artifacts_bucket_prefix}*), whatever a bucket policy grants",
        *bucket_perimeter_commands(account, out),
        "# without an organization with all features, or with the stacks in its management account, no RCP holds; "
        "instead, in each region the stacks deploy to, an analyzer that reports a grant outside the account:",
        f"# {without_organizations_command()}",
    ]


def pulumi_cloud_step(out: Path) -> str:
    """Pulumi Cloud's policies are entered by hand (or with the Pulumi Service provider): no command here."""
    return (
        f"# before the last command, in Pulumi Cloud: Settings > Access Management > OIDC Issuers > the GitHub issuer,"
        f" one allow policy per entry of {out}/pulumi-oidc-policies.json"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", required=True, help="OWNER/REPO of this repository on GitHub")
    parser.add_argument("--account-id", required=True, help="the AWS account the stacks deploy to")
    parser.add_argument("--partition", default="aws")
    parser.add_argument("--owner-id", type=int, help="with immutable subject claims: the owner's numeric id")
    parser.add_argument("--repository-id", type=int, help="with immutable subject claims: the repository's id")
    parser.add_argument(
        "--reviewer",
        action="append",
        required=True,
        type=Reviewer.parse,
        help="Team:<id> or User:<id>; repeat for up to six",
    )
    parser.add_argument("--pulumi-org", required=True, help="the Pulumi Cloud organization of the stacks")
    parser.add_argument("--preview-team", default=PREVIEW_TEAM, help="the Pulumi team whose tokens preview")
    parser.add_argument("--deploy-team", default=DEPLOY_TEAM, help="the Pulumi team whose tokens deploy")
    parser.add_argument(
        "--existing-cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="a cluster a stack uses with cluster.existing (not created by a stack); repeat for each",
    )
    parser.add_argument(
        "--data-bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="a bucket the stacks' jobs read data from (job.dataset, job.model, job.resumeFrom), read-only; repeat "
        "for each",
    )
    parser.add_argument("--out", type=Path, default=Path("build/ci"))
    args = parser.parse_args(argv)
    if not (args.account_id.isdigit() and len(args.account_id) == 12):
        parser.error(f"--account-id: expected 12 digits, got {args.account_id!r}")
    for bucket in args.data_bucket:
        if problem := bucket_name_problem(bucket):
            parser.error(f"--data-bucket: {problem}")
    repository = Repository.parse(args.repository, args.owner_id, args.repository_id)
    account = Account(
        args.account_id,
        args.partition,
        existing_clusters=tuple(args.existing_cluster),
        data_buckets=tuple(dict.fromkeys(args.data_bucket)),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    written = documents(repository, account, args.reviewer) | pipeline_documents(
        repository, args.pulumi_org, args.preview_team, args.deploy_team
    )
    for name, document in written.items():
        (args.out / name).write_text(json.dumps(document, indent=2) + "\n")
    print("\n".join(commands(repository, account, args.out)))
    print(pulumi_cloud_step(args.out))
    print("\n".join(organization_step(account, args.out)))
    print(f"# then set fsdp-eks:cluster.rolePermissionsBoundary to {account.boundary_arn} on every stack CI deploys")
    # The deploy role manages only clusters so named (ci/deploy_policy.py Account.cluster_name_prefix).
    print(
        f"# and name every cluster CI creates {account.cluster_name_prefix}* (the default, "
        f"{account.cluster_name_prefix}<stack>, is; preview refuses another); an existing cluster only with "
        "--existing-cluster NAME"
    )
    # The boundary lets the stacks' roles reach S3 only there (ci/role_boundary.py).
    print(
        f"# the jobs write only to buckets named {account.artifacts_bucket_prefix}* in this account (the default, "
        "the stack's own); they read data from those and from each --data-bucket NAME"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
