"""Whether a stack can be deployed by CI at all, checked in the deploy workflow's `stack` job before anything is
created or previewed.

    python -m ci.deploy_ready --stack dev --deploy-role-arn arn:aws:iam::123456789012:role/fsdp-eks-ci-deploy \
        --runner codebuild-fsdp-eks-deploy-{0}-{1} --runner-cidrs 203.0.113.16/28

Each of these would otherwise fail in the middle of `up`, after the VPC (and for the last two the control plane and
the GPU nodes) exist and bill; all are reported at once, each with the line that fixes it:
- the permissions boundary: the deploy role creates IAM roles only with it attached (ci/deploy_policy.py:
  `iam:CreateRole` under the condition `iam:PermissionsBoundary` equal to the boundary's ARN), and the program
  attaches one only when the stack sets `fsdp-eks:cluster.rolePermissionsBoundary` (infra/iam_scope.py). With the
  deploy role's ARN (the repository variable `AWS_DEPLOY_ROLE_ARN`) the account is named and the value must be
  exactly the boundary the deploy role requires; without it, that the value names the boundary policy;
- the runner: the workflow runs `pulumi` on `DEPLOY_RUNNER`, a runner whose egress addresses are fixed
  (`DEPLOY_RUNNER_CIDRS`), and a new cluster's API endpoint must admit them (stack/endpoint_access.py); a
  GitHub-hosted standard runner has no such addresses;
- the deploy role's access entry: EKS gives the role that creates the cluster a cluster-admin entry itself, so a
  stack listing the deploy role in `cluster.adminRoleArns` without naming the creator would have its second entry
  refused (ResourceInUseException, stack/cluster_checks.py).

Runs with the program's dependencies (requirements.lock), the only ones the `stack` job installs; it calls nothing.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.deploy_policy import Account
from stack.cluster_checks import role_key
from stack.endpoint_access import Route, is_world, unreachable_problem
from stack.fields import NAMESPACE, ConfigError
from stack.files import raw_stack_config
from stack.parse import parse_stack_config
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


# GitHub-hosted standard runners: their egress is any of GitHub's (Azure's) address ranges, thousands of them and
# changing (GitHub docs, "About GitHub-hosted runners", IP addresses), more than an EKS endpoint admits.
HOSTED_RUNNER = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$")
RUNNER_VARIABLES = "the repository variables DEPLOY_RUNNER and DEPLOY_RUNNER_CIDRS (docs/ci.md, 'Where CI runs pulumi')"


def runner_problems(runner: str, cidrs: list[str]) -> list[str]:
    """Whether the workflow's runner has fixed egress addresses the stack can admit."""
    problems = []
    if not runner or HOSTED_RUNNER.match(runner):
        problems.append(
            f"DEPLOY_RUNNER is {runner or 'unset'!r}: the deploy workflow would run pulumi on a GitHub-hosted standard "
            "runner, whose egress is no fixed address a cluster's API endpoint could admit. Set "
            f"{RUNNER_VARIABLES}: a CodeBuild-hosted runner in a VPC behind a NAT gateway "
            "(codebuild-<project>-{0}-{1}), a larger runner with static IP addresses, or a self-hosted one"
        )
    if not cidrs:
        problems.append(f"DEPLOY_RUNNER_CIDRS is unset: the runner's egress CIDRs are needed. Set {RUNNER_VARIABLES}")
    for cidr in cidrs:
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            problems.append(f"DEPLOY_RUNNER_CIDRS: {cidr!r} is not allowed; expected IPv4 CIDRs")
            continue
        if is_world(cidr):
            problems.append(f"DEPLOY_RUNNER_CIDRS: {cidr!r} is not allowed; expected the runner's own egress addresses")
    return problems


def deploy_role_entry_problem(stack: str, config: Mapping[str, Any], deploy_role_arn: str) -> str | None:
    """The deploy role listed in adminRoleArns with no creator named: on a new stack the deploy role creates the
    cluster and EKS makes its entry itself, so the stack's own entry for it would be refused
    (ResourceInUseException) after the control plane exists."""
    section = config.get(f"{NAMESPACE}:{SECTION}")
    if not deploy_role_arn or not isinstance(section, Mapping) or section.get("creatorRoleArn"):
        return None
    deploy_role = role_key(deploy_role_arn)
    listed = [
        arn for arn in section.get("adminRoleArns") or [] if isinstance(arn, str) and role_key(arn) == deploy_role
    ]
    if not listed:
        return None
    return (
        f"Pulumi.{stack}.yaml lists the CI deploy role {listed[0]} in {NAMESPACE}:cluster.adminRoleArns without "
        f"{NAMESPACE}:cluster.creatorRoleArn: EKS gives the role that creates the cluster its access entry itself, and "
        "the stack's second one would be refused (ResourceInUseException) after the control plane exists. Name the "
        f"creator: pulumi config set --path {NAMESPACE}:cluster.creatorRoleArn {deploy_role_arn} (or, for a cluster "
        "created before CI, the role that created it), and commit the stack file"
    )


def reach_problems(stack: str, config: Mapping[str, Any], cidrs: list[str]) -> list[str]:
    """Whether the runner reaches the API endpoint of the cluster the stack creates; the stack file's own problems
    if it does not parse."""
    try:
        parsed = parse_stack_config(config, stack)
    except ConfigError as error:
        return [f"Pulumi.{stack}.yaml: {problem}" for problem in error.problems]
    problem = unreachable_problem(parsed, Route.CI, cidrs)
    return [problem] if problem else []


def stack_problems(stack: str, root: Path, deploy_role_arn: str, runner: str, runner_cidrs: list[str]) -> list[str]:
    """Every reason CI cannot deploy `stack` (its stack file under `root`)."""
    config = raw_stack_config(stack, root)
    expected = expected_boundary(deploy_role_arn)
    problems = [p for p in (boundary_problem(stack, config, expected),) if p]
    problems += runner_problems(runner, runner_cidrs)
    if not any(p.startswith("DEPLOY_RUNNER_CIDRS") for p in problems):
        problems += reach_problems(stack, config, runner_cidrs)
    entry = deploy_role_entry_problem(stack, config, deploy_role_arn)
    return problems + ([entry] if entry else [])


def main(argv: list[str] | None = None, root: Path = PROJECT_ROOT) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="the stack's name without the organization (dev, p5-16, ...)")
    parser.add_argument(
        "--deploy-role-arn", default="", help="the CI deploy role's ARN (AWS_DEPLOY_ROLE_ARN): names the account"
    )
    parser.add_argument("--runner", default="", help="the runner the workflow runs pulumi on (DEPLOY_RUNNER)")
    parser.add_argument(
        "--runner-cidrs", default="", help="the runner's egress CIDRs, comma- or space-separated (DEPLOY_RUNNER_CIDRS)"
    )
    args = parser.parse_args(argv)
    cidrs = [c for c in re.split(r"[\s,]+", args.runner_cidrs) if c]
    try:
        problems = stack_problems(args.stack, root, args.deploy_role_arn, args.runner, cidrs)
    except (FileNotFoundError, ValueError) as error:
        problems = [str(error)]
    if not problems:
        print(f"{args.stack}: {CONFIG_PATH} set, and the runner {args.runner} reaches the cluster's endpoint")
        return 0
    for problem in problems:
        print(error_annotation(problem))
    print("\n\n".join(problems), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
