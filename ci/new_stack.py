"""What CI needs for one stack, done where it is a file of this repository and printed where it is not.

    python -m ci.new_stack --stack my-run --account-id 123456789012

Done: the stack's name in .github/workflows/deploy.yml's `workflow_dispatch` stack options, which must equal the
stack files (tests/workflows/test_workflow_rules.py). Printed, each with the values of this stack: the stack file's
permissions boundary and creator role, the token's secret in the stack's region, the data buckets the boundary must
admit, the Pulumi Cloud teams' access, the preview role's access entry on the new cluster, and `DEPLOY_STACK`. Nothing
here calls AWS, GitHub or Pulumi Cloud; docs/ci.md, "Checklist", says why each step is needed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ci.deploy_policy import Account
from ci.pulumi_oidc import DEPLOY_TEAM, PREVIEW_TEAM
from stack.config import StackConfig
from stack.fields import NAMESPACE, ConfigError
from stack.files import load_stack_config, stack_names
from stack.names import ARTIFACTS_BUCKET_PREFIX, SECRET_NAME_PREFIX
from stack.paths import PROJECT_ROOT
from stack.trainer_config import job_s3_inputs
from trainer.base.s3.uri import S3Uri

DEPLOY_WORKFLOW = Path(".github/workflows/deploy.yml")
# The one line of deploy.yml that lists the stacks a run by hand may choose (its `stack` input's options).
OPTIONS_LINE = re.compile(r"^(?P<indent>\s+)options: \[(?P<stacks>[^\]]*)\]$", re.MULTILINE)
VIEW_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def dispatch_options(workflow: str) -> list[str]:
    found = OPTIONS_LINE.search(workflow)
    if found is None:
        raise ValueError(f"{DEPLOY_WORKFLOW}: no `options: [...]` line for the stack input")
    return [name.strip() for name in found["stacks"].split(",") if name.strip()]


def with_dispatch_options(workflow: str, stacks: list[str]) -> str:
    """The workflow with its stack options set to `stacks`, the rest of the file as it was."""
    return OPTIONS_LINE.sub(lambda found: f"{found['indent']}options: [{', '.join(stacks)}]", workflow, count=1)


def add_to_dispatch(root: Path = PROJECT_ROOT) -> str:
    """deploy.yml's stack options made equal to the stack files; what was done."""
    path = root / DEPLOY_WORKFLOW
    workflow, stacks = path.read_text(), stack_names(root)
    if dispatch_options(workflow) == stacks:
        return f"done already: {DEPLOY_WORKFLOW} offers {', '.join(stacks)}"
    path.write_text(with_dispatch_options(workflow, stacks))
    return f"done: {DEPLOY_WORKFLOW} now offers {', '.join(stacks)}; commit it with the stack file"


def set_line(stack: str, key: str, value: str) -> str:
    return f"pulumi config set --stack {stack} --path {NAMESPACE}:{key} {value}"


def stack_file_steps(config: StackConfig, account: Account) -> list[str]:
    """The settings a CI-deployed stack's file needs, each a command, or none when it has them."""
    steps, cluster = [], config.cluster
    if cluster.role_permissions_boundary != account.boundary_arn:
        steps.append(set_line(config.stack, "cluster.rolePermissionsBoundary", account.boundary_arn))
    deploy_role = account.arn("role", account.deploy_role)
    if not cluster.existing and cluster.creator_role_arn != deploy_role:
        steps.append(set_line(config.stack, "cluster.creatorRoleArn", deploy_role) + "   # before its first up")
    return steps


def secret_steps(config: StackConfig) -> list[str]:
    secret = config.job.hf_token_secret
    if secret is None:
        return []
    if not secret.split(":secret:")[-1].startswith(SECRET_NAME_PREFIX):
        return [
            f"# {NAMESPACE}:job.hfTokenSecret {secret}: name it under {SECRET_NAME_PREFIX}, the only secrets the "
            "boundary lets the pods read"
        ]
    return [
        f'aws secretsmanager create-secret --region {config.region} --name {secret} --secret-string "$HF_TOKEN"'
        "   # once; python -m preflight checks it"
    ]


def data_bucket_steps(config: StackConfig) -> list[str]:
    """The input buckets the boundary admits only once registered (those not named like the stacks' own)."""
    buckets = sorted({S3Uri.parse(uri, "input").bucket for uri in job_s3_inputs(config.job)})
    outside = [bucket for bucket in buckets if not bucket.startswith(ARTIFACTS_BUCKET_PREFIX)]
    if not outside:
        return []
    flags = " ".join(f"--data-bucket {bucket}" for bucket in outside)
    return [
        f"python -m ci <the one-time arguments> {flags} --out build/ci   # and every bucket registered before",
        "aws iam create-policy-version --policy-arn <the boundary's ARN> --policy-document "
        "file://build/ci/role-boundary-policy.json --set-as-default",
    ]


def access_entry_steps(config: StackConfig, account: Account) -> list[str]:
    preview_role = account.arn("role", account.preview_role)
    where = f"--region {config.region} --cluster-name {config.cluster_name} --principal-arn {preview_role}"
    return [
        f"aws eks create-access-entry {where}",
        f"aws eks associate-access-policy {where} --policy-arn {VIEW_POLICY} --access-scope type=cluster",
    ]


def checklist(config: StackConfig, account: Account, pulumi_org: str, dispatch: str) -> list[str]:
    stack = config.stack
    first_up = "after its first up" if not config.cluster.existing else "now: the cluster exists"
    return [
        f"# 1. deploy.yml's dispatch list: {dispatch}",
        "# 2. the stack file (commit it):",
        *(stack_file_steps(config, account) or ["#    it has the boundary and the creator role already"]),
        "# 3. the token's secret, in the stack's region:",
        *(secret_steps(config) or ["#    no job.hfTokenSecret: none"]),
        "# 4. the s3:// inputs' buckets, admitted by the boundary:",
        *(data_bucket_steps(config) or ["#    none outside the stacks' own buckets"]),
        f"# 5. Pulumi Cloud: {PREVIEW_TEAM} reads and {DEPLOY_TEAM} writes {pulumi_org}/fsdp-eks/{stack} (their "
        "stack permissions; the deploy workflow's create job makes the stack)",
        f"# 6. the preview role's access entry on {config.cluster_name}, {first_up}:",
        *access_entry_steps(config, account),
        f"# 7. optional, to deploy {stack} on every push to main:",
        f"gh variable set DEPLOY_STACK --body {stack}",
        "# then the deploy workflow's own first check of the stack file (with its runner's options, docs/ci.md):",
        f"python -m ci.deploy_ready --stack {stack} --deploy-role-arn {account.arn('role', account.deploy_role)}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, help="the stack CI is to deploy (its Pulumi.<stack>.yaml exists)")
    parser.add_argument("--account-id", required=True, help="the AWS account the stacks deploy to")
    parser.add_argument("--partition", default="aws")
    parser.add_argument("--pulumi-org", default="<org>", help="the Pulumi Cloud organization of the stacks")
    args = parser.parse_args(argv)
    try:
        config = load_stack_config(args.stack)
    except (ConfigError, FileNotFoundError) as error:
        print(f"ci.new_stack: {error}", file=sys.stderr)
        return 2
    print("\n".join(checklist(config, Account(args.account_id, args.partition), args.pulumi_org, add_to_dispatch())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
