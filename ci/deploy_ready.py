"""Whether a stack can be deployed by CI at all, checked in the deploy workflow's `stack` job before anything is
created or previewed.

    python -m ci.deploy_ready --stack dev [--deploy-role-arn arn:aws:iam::123456789012:role/fsdp-eks-ci-deploy]

The deploy role creates IAM roles only with the permissions boundary attached (ci/deploy_policy.py: `iam:CreateRole`
under the condition `iam:PermissionsBoundary` equal to the boundary's ARN), and the program attaches one only when
the stack sets `fsdp-eks:cluster.rolePermissionsBoundary` (infra/iam_scope.py). Without it the first `CreateRole`
is refused in the middle of `up`, after the VPC and its NAT gateways exist. This reads the stack's file, which the
job has checked out, and fails with the one command that fixes it. With the deploy role's ARN (the repository
variable `AWS_DEPLOY_ROLE_ARN`) it names the account and checks the value is exactly the boundary the deploy role
requires; without it, that the value names the boundary policy.

Runs with the program's dependencies (requirements.lock), the only ones the `stack` job installs; it calls nothing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.deploy_policy import Account
from stack.fields import NAMESPACE
from stack.files import raw_stack_config
from stack.paths import PROJECT_ROOT

SECTION, KEY = "cluster", "rolePermissionsBoundary"
CONFIG_PATH = f"{NAMESPACE}:{SECTION}.{KEY}"
# arn:<partition>:iam::<account>:role/<path/>name (IAM User Guide, "IAM identifiers", IAM ARNs).
ROLE_ARN = re.compile(r"^arn:(?P<partition>aws[\w-]*):iam::(?P<account>\d{12}):role/.+$")
ACCOUNT_PLACEHOLDER = "<account>"


@dataclass(frozen=True)
class Expected:
    """The boundary ARN the deploy role requires, as far as it is known: the account only from the deploy role."""

    arn: str
    account_known: bool


def expected_boundary(deploy_role_arn: str | None) -> Expected:
    """The boundary's ARN for the deploy role's account and partition, or with `<account>` when the role is unknown."""
    if not deploy_role_arn:
        return Expected(Account(ACCOUNT_PLACEHOLDER).boundary_arn, account_known=False)
    match = ROLE_ARN.match(deploy_role_arn)
    if not match:
        raise ValueError(f"--deploy-role-arn {deploy_role_arn!r} is not an IAM role ARN")
    return Expected(Account(match["account"], partition=match["partition"]).boundary_arn, account_known=True)


def fix_command(expected: Expected) -> str:
    """The one line that sets the boundary on the stack (docs/ci.md, One-time setup, 2. AWS)."""
    return f"pulumi config set --path {CONFIG_PATH} {expected.arn}"


def _is_expected(value: object, expected: Expected) -> bool:
    """The value is the expected ARN; with the account unknown, for any 12-digit account."""
    if expected.account_known or not isinstance(value, str):
        return value == expected.arn
    prefix, _, suffix = expected.arn.partition(ACCOUNT_PLACEHOLDER)
    middle = value[len(prefix) : len(value) - len(suffix)] if len(value) > len(prefix) + len(suffix) else ""
    return value.startswith(prefix) and value.endswith(suffix) and re.fullmatch(r"\d{12}", middle) is not None


def error_annotation(message: str) -> str:
    """A GitHub error annotation, shown on the run's page (GitHub docs, "Workflow commands for GitHub Actions",
    Setting an error message); `%`, CR and LF are escaped as the runner's command parser expects
    (actions/toolkit packages/core/src/command.ts escapeData)."""
    escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::error title=Not deployable by CI::{escaped}"


def boundary_problem(stack: str, config: Mapping[str, Any], expected: Expected) -> str | None:
    """Why `stack` (its stack file's config) cannot be deployed by CI, or None."""
    section = config.get(f"{NAMESPACE}:{SECTION}")
    value = section.get(KEY) if isinstance(section, Mapping) else None
    set_it = (
        f"with the stack selected (pulumi stack select {stack}), run\n  {fix_command(expected)}\n"
        f"and commit Pulumi.{stack}.yaml."
    )
    if not value:
        return (
            f"Pulumi.{stack}.yaml does not set {CONFIG_PATH}: the CI deploy role creates IAM roles only with the "
            f"permissions boundary, so `pulumi up` would fail at the first role, after the VPC is built. Once per "
            f"stack, {set_it}"
        )
    if not _is_expected(value, expected):
        return (
            f"Pulumi.{stack}.yaml sets {CONFIG_PATH} to {value!r}, not the boundary the CI deploy role requires "
            f"({expected.arn}): the role's CreateRole would be refused. {set_it[0].upper()}{set_it[1:]}"
        )
    return None


def main(argv: list[str] | None = None, root: Path = PROJECT_ROOT) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack's name without the organization (dev, p5-16, ...)")
    parser.add_argument(
        "--deploy-role-arn", default="", help="the CI deploy role's ARN (AWS_DEPLOY_ROLE_ARN): names the account"
    )
    args = parser.parse_args(argv)
    try:
        expected = expected_boundary(args.deploy_role_arn)
        problem = boundary_problem(args.stack, raw_stack_config(args.stack, root), expected)
    except (FileNotFoundError, ValueError) as error:
        problem = str(error)
    else:
        if problem is None:
            print(f"{args.stack}: {CONFIG_PATH} is {expected.arn if expected.account_known else 'set'}")
            return 0
    print(error_annotation(problem))
    print(problem, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
