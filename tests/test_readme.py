"""README's quickstart: it reaches `pulumi up` within the first 100 lines, after the two local commands, and what it
states (versions, quota, commands) is what the project pins and builds."""

from __future__ import annotations

import re

from sizing.catalog import CATALOG
from stack.config import KUBERNETES_VERSIONS, StackConfig
from stack.files import raw_stack_config
from stack.parse import parse_stack_config
from stack.paths import PROJECT_ROOT
from workloads.platform.objects import artifacts_commands, next_commands

README = (PROJECT_ROOT / "README.md").read_text()
LINES = README.splitlines()
QUICKSTART = README[README.index("## Quickstart") : README.index("## What else is here")]


def quickstart_config_sets() -> dict[str, str]:
    """The `pulumi config set --path fsdp-eks:job.KEY VALUE` lines of the quickstart, key -> value."""
    return dict(re.findall(r"pulumi config set --path fsdp-eks:job\.(\w+) (\S+)", QUICKSTART))


def quickstart_stack() -> StackConfig:
    """The stack the quickstart makes: a copy of p5-2 named my-run with the job settings it sets."""
    stack = re.search(r"cp Pulumi\.(\S+)\.yaml Pulumi\.(\S+)\.yaml && pulumi stack init \2", QUICKSTART)
    assert stack is not None
    raw = raw_stack_config(stack.group(1))
    raw["fsdp-eks:job"] = {**raw["fsdp-eks:job"], **quickstart_config_sets()}
    return parse_stack_config(raw, stack.group(2))


def test_the_two_local_commands_come_first_and_pulumi_up_within_100_lines() -> None:
    first_block = README[README.index("```bash") : README.index("```", README.index("```bash") + 3)]
    assert [line.split()[:2] for line in first_block.splitlines()[1:]] == [["make", "demo"], ["make", "test"]]
    assert any(line.strip() == "pulumi up" for line in LINES[:100])


def test_the_pulumi_cli_version_is_the_sdk_pin() -> None:
    pin = re.search(r"^pulumi==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert pin is not None
    assert f"| Pulumi CLI | {pin.group(1)}, " in QUICKSTART


def test_the_kubectl_versions_are_within_one_minor_of_the_default_cluster() -> None:
    """kubectl is supported within one minor version of the API server (Kubernetes version skew policy)."""
    major, minor = KUBERNETES_VERSIONS[-1].split(".")
    low, high = f"{major}.{int(minor) - 1}", f"{major}.{int(minor) + 1}"
    assert f"| kubectl | {low} to {high} (one minor version of the cluster's {KUBERNETES_VERSIONS[-1]}) |" in QUICKSTART


def test_the_quota_is_the_stacks_vcpus() -> None:
    config = quickstart_stack()
    vcpus = config.gpu_nodes.count * CATALOG[config.gpu_nodes.instance_type].vcpus
    per_node = CATALOG[config.gpu_nodes.instance_type].vcpus
    assert f"of {vcpus} vCPUs in the region ({per_node} per {config.gpu_nodes.instance_type})" in QUICKSTART


def test_the_quickstart_stack_is_valid_and_fits() -> None:
    config = quickstart_stack()
    assert config.job.model == "meta-llama/Llama-3.1-8B" and config.job.dataset.startswith("s3://")
    assert config.gpu_nodes.count == 2 and config.job.hf_token_secret is not None


def test_the_quickstart_commands_are_the_stacks_next_commands() -> None:
    """Watching, waiting for success and getting the model: the very commands the stack exports."""
    commands = next_commands(quickstart_stack())
    for key in ("kubeconfig", "leaderLog", "waitForJob"):
        assert commands[key] in QUICKSTART, key
    # The model's download is read from the output itself: it names the bucket and waits for the export's manifest.
    (download,) = [line.strip() for line in QUICKSTART.splitlines() if "downloadModel" in line and "|" in line]
    assert download.startswith("pulumi stack output nextCommands --json |") and download.endswith("| bash")
    assert '["downloadModel"]' in download and "downloadModel" in artifacts_commands("")
    record = "aws s3 cp --recursive $(pulumi stack output artifactsUri)record/ ./record"
    assert record in QUICKSTART
    uri = "s3://fsdp-eks-my-run-artifacts-abc/fsdp-eks/my-run/run-1/"
    assert artifacts_commands(uri)["downloadRecord"] == record.replace("$(pulumi stack output artifactsUri)", uri)
