"""The pack's policies see what the program really registers: __main__.py run under mocks for every stack, every
registered resource fed to every policy. The real stacks pass every mandatory policy; one mutated resource of a
real stack fails the policy about it."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from infra.stack_files import load_stack_config
from policy.cost import DEFAULT_MAX_COST_PER_HOUR
from tests.harness.pulumi_program import ProgramRun, Registered, run_program
from tests.policy.engine import analyze, mandatory

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "eks:index:ManagedNodeGroup"
PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
RELEASE = "kubernetes:helm.sh/v3:Release"
TOKEN = "hf_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDc"


def test_every_stack_passes_every_mandatory_policy(stack_run: ProgramRun) -> None:
    assert mandatory(analyze(stack_run.resources)) == []


def test_the_cost_advisory_fires_where_the_stacks_own_estimate_exceeds_the_budget(stack_run: ProgramRun) -> None:
    fired = [v for v in analyze(stack_run.resources) if v.policy == "gpu-cost-per-hour-budget"]
    over = load_stack_config(stack_run.stack).cost_per_hour > DEFAULT_MAX_COST_PER_HOUR
    assert bool(fired) == over, fired


def test_the_program_registers_what_the_policies_are_about() -> None:
    types = {r.type for r in run_program("p5-16").resources}
    assert {LAUNCH_TEMPLATE, NODE_GROUP, PYTORCHJOB, RELEASE, "kubernetes:core/v1:Service"} <= types


def test_config_the_policies_must_refuse_or_accept_reaches_them_through_the_program() -> None:
    """One run, two settings: a real HF token (it must land in the Secret only, which the pack accepts) and a
    public Grafana (which it refuses)."""
    run = run_program("p5-2", {"fsdp-eks:monitoring": {"grafanaLoadBalancer": True}},
                      secrets={"fsdp-eks:hfToken": TOKEN})
    assert run.error is None, run.error
    assert any(TOKEN in str(r.inputs) for r in run.of_type("kubernetes:core/v1:Secret"))
    assert _failed(run.resources) == {"no-public-monitoring-or-etcd"}


def _mutated(run: ProgramRun, type_token: str, change: Callable[[dict[str, Any]], None],
             name: str | None = None) -> list[Registered]:
    """The run's resources with one resource's inputs changed (the first of the type, or the one named)."""
    target = next(r for r in run.of_type(type_token) if name is None or r.name == name)
    inputs = copy.deepcopy(target.inputs)
    change(inputs)
    return [dataclasses.replace(r, inputs=inputs) if r is target else r for r in run.resources]


def _failed(resources: list[Registered]) -> set[str]:
    return {v.policy for v in mandatory(analyze(resources))}


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def _set_flag(job: dict[str, Any], flag: str, value: str) -> None:
    command = _worker(job)["command"]
    command[command.index(flag) + 1] = value


MUTATIONS: dict[str, tuple[str, str | None, Callable[[dict[str, Any]], None]]] = {
    "efa-on-every-network-card": (
        LAUNCH_TEMPLATE, "gpu-template",
        lambda lt: lt.update(networkInterfaces=[i for i in lt["networkInterfaces"] if i["networkCardIndex"] != 5]),
    ),
    "gpu-node-group-one-az": (NODE_GROUP, "gpu-nodes", lambda g: g["subnetIds"].append("network-private-1-id")),
    "launch-template-imdsv2": (LAUNCH_TEMPLATE, None, lambda lt: lt["metadataOptions"].update(httpTokens="optional")),
    "no-public-monitoring-or-etcd": (
        "kubernetes:core/v1:Service", None, lambda s: s["spec"].update(type="LoadBalancer"),
    ),
    "hf-token-only-from-secret": (
        PYTORCHJOB, None, lambda j: _worker(j)["env"].append({"name": "HUGGING_FACE_HUB_TOKEN", "value": TOKEN}),
    ),
    "pytorchjob-matches-node-type": (
        PYTORCHJOB, None, lambda j: _worker(j)["resources"]["limits"].update({"nvidia.com/gpu": "4"}),
    ),
    "job-memory-fits-gpu": (
        PYTORCHJOB, None,
        lambda j: (_set_flag(j, "--model", "llama2-70b"), _set_flag(j, "--sharding-strategy", "NO_SHARD")),
    ),
}


@pytest.mark.parametrize("policy", sorted(MUTATIONS))
def test_a_mutated_resource_of_a_real_stack_fails_its_policy(policy: str) -> None:
    type_token, name, change = MUTATIONS[policy]
    assert _failed(_mutated(run_program("p5-16"), type_token, change, name)) == {policy}


def test_every_mandatory_policy_has_a_mutation_test() -> None:
    from policy.pack import POLICIES

    names = {p.name for p in POLICIES if p.name != "gpu-cost-per-hour-budget"}
    assert names == set(MUTATIONS)
