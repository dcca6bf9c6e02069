"""docs/aws.md states what the program does with the facts the program uses: an existing cluster's node
prerequisites from stack/node_contract.py, the failure codes AWS answers with, and the reservation update path
the preview warns about."""

from __future__ import annotations

from infra.addons import VPC_CNI
from infra.gpu_nodes import SCALE_TO_ZERO
from stack.node_contract import EFA_HUGEPAGES_PER_NODE, EFA_LABEL, GPU_NODE_GROUP_LABEL, GPU_TAINT, HUGEPAGE_SIZE_MIB
from stack.paths import PROJECT_ROOT as ROOT

AWS_DOC = " ".join((ROOT / "docs" / "aws.md").read_text().split())  # line breaks do not matter


def test_the_readme_links_the_aws_page() -> None:
    assert "(docs/aws.md)" in (ROOT / "README.md").read_text()


def test_the_existing_cluster_prerequisites_are_the_node_contract() -> None:
    prerequisites = AWS_DOC[AWS_DOC.index("## An existing cluster") :]
    label_key, label_value = GPU_NODE_GROUP_LABEL
    effect = {"NO_SCHEDULE": "NoSchedule"}[GPU_TAINT["effect"]]
    for fact in (
        f"`{label_key}={label_value}`",
        f"`{EFA_LABEL}=true`",
        f"`{GPU_TAINT['key']}={GPU_TAINT['value']}:{effect}`",
        f"`vm.nr_hugepages={EFA_HUGEPAGES_PER_NODE}`",
        f"{EFA_HUGEPAGES_PER_NODE} huge pages of {HUGEPAGE_SIZE_MIB} MiB",
        *(f'`{key}: "{value}"`' for key, value in VPC_CNI.configuration.items()),
        "`job.checkpointClaim`",
    ):
        assert fact in prerequisites, fact


def test_the_failure_modes_name_what_aws_answers() -> None:
    failures = AWS_DOC[AWS_DOC.index("## Failures AWS can still answer with") : AWS_DOC.index("## Updating nodes")]
    for code in (
        "VcpuLimitExceeded",
        "InsufficientInstanceCapacity",
        "Unsupported",
        "AsgInstanceLaunchFailures",
        "NodeCreationFailure",
        "invalid stack config:",
    ):
        assert code in failures, code


def test_the_reservation_update_path_is_the_one_the_preview_gives() -> None:
    path = AWS_DOC[AWS_DOC.index("## Updating nodes in a reservation") : AWS_DOC.index("## Capacity blocks")]
    for setting in SCALE_TO_ZERO.split(" and "):
        key, value = setting.split(" ")
        assert f"pulumi config set --path fsdp-eks:{key} {value}" in path, setting


def test_the_endpoint_and_name_limits_are_the_ones_the_checks_apply() -> None:
    from stack.cluster_checks import NODE_GROUP_NAME_PREFIX_MAX_LENGTH, longest_cluster_name
    from stack.endpoint_access import OWN_CIDR_FIX

    assert " ".join(OWN_CIDR_FIX.split()) in AWS_DOC
    names = AWS_DOC[AWS_DOC.index("## Cluster name and administrators") :]
    assert f"at most {NODE_GROUP_NAME_PREFIX_MAX_LENGTH} characters" in names
    assert f"at most {longest_cluster_name()} characters" in names


def test_idle_nodes_and_run_costs_are_described_as_the_code_does_them() -> None:
    from stack.files import load_stack_config
    from stack.gpu_autoscaling import SCALE_DOWN_UNNEEDED_S
    from stack.price_list import PRICE_TAG_KEY
    from stack.run_cost import ASSUMED_BRING_UP_S, run_phases

    idle = AWS_DOC[AWS_DOC.index("## Idle GPU nodes") : AWS_DOC.index("## What a run costs")]
    assert f"{SCALE_DOWN_UNNEEDED_S // 60} minutes" in idle
    assert "`gpuNodes.keepIdleNodes: true`" in idle and "`gpuNodes.spares`" in idle
    costs = AWS_DOC[AWS_DOC.index("## What a run costs") : AWS_DOC.index("## Kubernetes versions")]
    assert f"`{PRICE_TAG_KEY}`" in costs and f"assumed {ASSUMED_BRING_UP_S // 60} minutes" in costs
    for phase in run_phases(load_stack_config("p5-2"), None):
        assert f"`{phase.name}`" in costs, phase.name
    existing = AWS_DOC[AWS_DOC.index("## An existing cluster") :]
    assert "`pulumi destroy` of such a stack runs with `--run-program`" in existing
