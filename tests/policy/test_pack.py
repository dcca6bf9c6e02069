"""The pack as the Pulumi CLI loads it: the policies' names and levels, properties unwrapped from the SDK's
proxies (unknowns included), config defaults, and the entry point serving the pack with only its own
requirements imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import grpc
import pytest
from google.protobuf import empty_pb2, json_format
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.cost import CONFIG_SCHEMA, DEFAULT_MAX_COST_PER_HOUR
from policy.pack import POLICIES, plain
from policy.props import UNKNOWN, StackResource
from tests.policy.engine import _opts
from tests.policy.examples import node_group, pytorchjob, worker_container
from tests.workflows.workflows import ROOT

# Installed for the program (requirements.txt) or the tests, not for the pack (policy/requirements.txt).
NOT_IN_THE_PACKS_ENVIRONMENT = (
    "pulumi_aws",
    "pulumi_eks",
    "pulumi_kubernetes",
    "pulumi_random",
    "pulumi_docker_build",
    "torch",
    "transformers",
    "jsonschema",
    "kubernetes_validate",
    "prometheus_client",
    "matplotlib",
)


def _resource_policy(name: str) -> ResourceValidationPolicy:
    policy = next(p for p in POLICIES if p.name == name)
    assert isinstance(policy, ResourceValidationPolicy), f"{name} is not a resource policy"
    return policy


def _stack_policy(name: str) -> StackValidationPolicy:
    policy = next(p for p in POLICIES if p.name == name)
    assert isinstance(policy, StackValidationPolicy), f"{name} is not a stack policy"
    return policy


def test_policy_names_are_unique() -> None:
    assert len({p.name for p in POLICIES}) == len(POLICIES)


def test_only_the_cost_budget_is_advisory() -> None:
    advisory = {p.name for p in POLICIES if p.enforcement_level == EnforcementLevel.ADVISORY}
    assert advisory == {"gpu-cost-per-hour-budget"}
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in POLICIES if p.name not in advisory)


def test_plain_turns_proxies_into_dicts_with_unknown_markers() -> None:
    props = unknown_checking_proxy({"a": [1, UNKNOWN_STRING_VALUE, {"b": UNKNOWN_STRING_VALUE}], "c": "x"})
    assert plain(props) == {"a": [1, UNKNOWN, {"b": UNKNOWN}], "c": "x"}


def test_an_unknown_image_does_not_stop_the_job_checks() -> None:
    """During preview the pushed image's digest is unknown; the SDK raises on reading it, `plain` does not."""
    from pulumi_policy import ResourceValidationArgs

    job = pytorchjob("p5-16")
    worker_container(job)["image"] = UNKNOWN_STRING_VALUE
    worker_container(job)["env"].append({"name": "HF_TOKEN", "value": UNKNOWN_STRING_VALUE})
    found: list[str] = []
    args = ResourceValidationArgs(
        "kubernetes:kubeflow.org/v1:PyTorchJob", unknown_checking_proxy(job), "urn", "job", _opts(), None, {}
    )
    policy = _resource_policy("hf-token-only-from-secrets-manager")
    policy.validate(args, lambda message, urn=None: found.append(message))
    assert len(found) == 1 and "HF_TOKEN" in found[0]


def test_the_cost_budget_takes_its_limit_from_the_pack_config() -> None:
    from pulumi_policy import PolicyResource, StackValidationArgs

    group = StackResource("aws:eks/nodeGroup:NodeGroup", "urn:g", node_group("p5.48xlarge", 4))
    resources = [
        PolicyResource(
            group.type, unknown_checking_proxy(dict(group.props)), group.urn, "g", _opts(), None, None, [], {}
        )
    ]
    policy, found = _stack_policy("gpu-cost-per-hour-budget"), []
    policy.validate(StackValidationArgs(resources, {}), lambda m, urn=None: found.append(m))
    assert found == []  # 4 x p5 at list price is under the default budget
    policy.validate(StackValidationArgs(resources, {"maxCostPerHour": 100}), lambda m, urn=None: found.append(m))
    assert len(found) == 1


# Runs policy/__main__.py as the CLI does (in the pack's directory), with imports of packages outside the pack's
# environment refused, and prints the port the analyzer serves on.
ENTRY_POINT = textwrap.dedent(
    """
    import importlib.abc, runpy, sys
    BLOCKED = set(sys.argv[1].split(","))
    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"the policy pack imports {name}, which policy/requirements.txt does not install")
    sys.meta_path.insert(0, Refuse())
    runpy.run_path("__main__.py", run_name="__main__")
    """
)


@pytest.fixture(scope="module")
def served_pack():
    process = subprocess.Popen(
        [sys.executable, "-c", ENTRY_POINT, ",".join(NOT_IN_THE_PACKS_ENVIRONMENT)],
        cwd=ROOT / "policy",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None  # both piped above
    try:
        line = process.stdout.readline()
        if not line.strip().isdigit():
            process.kill()
            pytest.fail(f"the pack did not start: {line}{process.stderr.read()}")
        with grpc.insecure_channel(f"127.0.0.1:{line.strip()}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    finally:
        process.kill()
        process.wait(timeout=30)


def test_the_entry_point_serves_every_policy(served_pack) -> None:
    assert served_pack.name == "fsdp-eks"
    assert [p.name for p in served_pack.policies] == [p.name for p in POLICIES]


def test_the_served_cost_policy_declares_its_config(served_pack) -> None:
    (cost,) = [p for p in served_pack.policies if p.name == "gpu-cost-per-hour-budget"]
    assert cost.enforcementLevel == analyzer_pb2.ADVISORY
    properties = json_format.MessageToDict(cost.configSchema)["properties"]
    assert properties["maxCostPerHour"] == {**CONFIG_SCHEMA["maxCostPerHour"], "default": DEFAULT_MAX_COST_PER_HOUR}


def test_the_served_trust_policy_declares_the_accounts_it_may_be_given(served_pack) -> None:
    (trust,) = [p for p in served_pack.policies if p.name == "role-trust-within-account"]
    assert trust.enforcementLevel == analyzer_pb2.MANDATORY
    assert set(json_format.MessageToDict(trust.configSchema)["properties"]) == {"accountIds"}
