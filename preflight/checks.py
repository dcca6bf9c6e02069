"""Every preflight check of one stack, run together so that every problem shows at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from preflight.aws import AwsClients, aws_errors, error_text
from preflight.capacity import offering_findings, quota_findings
from preflight.findings import Finding, ok, problem, warning
from preflight.hub import HubApi, hub_findings
from preflight.image import Runner, image_findings, run_quietly
from preflight.s3_data import s3_findings
from preflight.secret import secret_findings
from stack.config import StackConfig
from stack.job_warnings import job_warnings

IDENTITY_CHECK = "AWS credentials"


@dataclass(frozen=True)
class Machine:
    """What the image check reads of this machine."""

    docker_config: Path
    architecture: str
    which: Callable[[str], str | None]
    run: Runner = run_quietly


def caller_account(clients: AwsClients) -> tuple[str | None, Finding]:
    try:
        identity = clients.sts.get_caller_identity()
    except aws_errors() as error:
        return None, problem(
            IDENTITY_CHECK,
            f"no usable AWS credentials: {error_text(error)}",
            "aws configure sso (or export AWS_PROFILE), then aws sts get-caller-identity",
        )
    return str(identity["Account"]), ok(IDENTITY_CHECK, f"{identity['Arn']} in account {identity['Account']}")


def run_checks(
    config: StackConfig, clients: AwsClients, hub: HubApi, hub_token: str | None, machine: Machine
) -> list[Finding]:
    """Every finding about `config`: AWS's (skipped without credentials, which is itself the first problem), the
    hub's, this machine's Docker, and the preview's own warnings about the job."""
    account, identity = caller_account(clients)
    findings = [identity]
    if account is not None:
        if config.job.enabled and not config.cluster.existing:  # an existing cluster brings its own nodes
            findings += quota_findings(config, clients.quotas) + offering_findings(config, clients.ec2)
        if config.job.enabled:
            findings += secret_findings(config, clients.secrets) + s3_findings(config, clients.s3)
    if config.job.enabled:
        findings += hub_findings(config, hub, hub_token)
        findings += image_findings(
            config, account, machine.docker_config, machine.architecture, machine.which, machine.run
        )
        findings += [warning("job", text) for text in job_warnings(config.job)]
    return findings
