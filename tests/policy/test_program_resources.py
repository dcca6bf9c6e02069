"""The pack's policies see what the engine shows them of the program's real registrations: __main__.py run under
mocks for every stack, turned into the engine's view (remote components without inputs, their children with theirs,
unknowns where a first preview has them: tests/policy/engine_view.py), every resource fed to every policy. The real
stacks pass every mandatory policy; one change to a real stack's registrations makes exactly the policy about it
fire, in a first preview and in an update preview. A policy without such a case, or whose case cannot fire in that
view, fails here."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from policy.cost import DEFAULT_MAX_COST_PER_HOUR
from policy.pack import POLICIES
from policy.props import NOT_CHECKED
from stack.files import raw_stack_config
from tests.harness.mock_runner import UNKNOWN_MARKER
from tests.harness.pulumi_program import ProgramRun, Registered, run_program
from tests.policy.engine import analyze, mandatory

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
RELEASE = "kubernetes:helm.sh/v3:Release"
SUBNET = "aws:ec2/subnet:Subnet"
ROLE = "aws:iam/role:Role"
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
OTHER_ACCOUNT_ROOT = "arn:aws:iam::210987654321:root"
TOKEN = "hf_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDc"
PREVIEWS = ("first", "update")
MUTATED_STACK = "p5-2"  # under the cost budget, so every case below starts from a stack no policy objects to


def preview_run(stack: str, preview: str) -> ProgramRun:
    """The stack as a first preview or an update preview runs it (the harness's plain run is the update view)."""
    run = run_program(stack, preview=preview)
    assert run.error is None, run.error
    return run


@pytest.mark.program
@pytest.mark.parametrize("preview", PREVIEWS)
def test_every_stack_passes_every_mandatory_policy(stack_run: ProgramRun, preview: str) -> None:
    assert mandatory(analyze(preview_run(stack_run.stack, preview).resources)) == []


@pytest.mark.program
@pytest.mark.parametrize("preview", PREVIEWS)
def test_the_cost_advisory_fires_where_the_stacks_own_estimate_exceeds_the_budget(
    stack_run: ProgramRun, preview: str
) -> None:
    fired = [
        v for v in analyze(preview_run(stack_run.stack, preview).resources) if v.policy == "gpu-cost-per-hour-budget"
    ]
    over = stack_run.outputs["estimatedCostPerHour"] > DEFAULT_MAX_COST_PER_HOUR  # at the price the preview read
    assert bool(fired) == over, fired


@pytest.mark.program
def test_the_program_registers_what_the_policies_are_about() -> None:
    types = {r.type for r in run_program("p5-16").resources}
    assert {LAUNCH_TEMPLATE, MANAGED_NODE_GROUP, PYTORCHJOB, RELEASE, "kubernetes:core/v1:Service"} <= types


@pytest.mark.program
def test_config_the_policies_must_refuse_reaches_them_through_the_program() -> None:
    """A public Grafana, chosen in the stack's config, reaches the pack through the program and is refused."""
    run = run_program("p5-2", {"fsdp-eks:monitoring": {"grafanaLoadBalancer": True}}, preview="first")
    assert run.error is None, run.error
    assert _failed(run.resources) == {"no-public-monitoring-or-etcd"}


def _named(run: ProgramRun, type_token: str, name: str | None) -> Registered:
    return next(r for r in run.of_type(type_token) if name is None or r.name == name)


def _mutated(
    run: ProgramRun, type_token: str, change: Callable[[ProgramRun, Registered], Registered], name: str | None = None
) -> list[Registered]:
    """The run's registrations with one of them changed (the first of the type, or the one named)."""
    target = _named(run, type_token, name)
    changed = change(
        run,
        dataclasses.replace(
            target,
            inputs=copy.deepcopy(target.inputs),
            property_dependencies=copy.deepcopy(target.property_dependencies),
        ),
    )
    return [changed if r is target else r for r in run.resources]


def _inputs(change: Callable[[dict[str, Any]], Any]) -> Callable[[ProgramRun, Registered], Registered]:
    def apply(_run: ProgramRun, resource: Registered) -> Registered:
        change(resource.inputs)
        return resource

    return apply


def _second_subnet(run: ProgramRun, group: Registered) -> Registered:
    """The GPU group given the other private subnet too, as the program would pass `[gpu_subnet.id, other.id]`:
    one more subnet id (unknown on a first preview, like the first) and a property dependency on that subnet."""
    other = next(
        s for s in run.of_type(SUBNET) if "private" in s.name and s.urn not in group.property_dependencies["subnetIds"]
    )
    first = group.inputs["subnetIds"][0]
    group.inputs["subnetIds"].append(first if first == UNKNOWN_MARKER else other.id)
    group.property_dependencies["subnetIds"].append(other.urn)
    return group


def _trusting(document: str, principal: str) -> str:
    """The trust policy with one more principal allowed in its first statement."""
    policy = json.loads(document)
    statements = policy["Statement"] if isinstance(policy["Statement"], list) else [policy["Statement"]]
    statements[0]["Principal"]["AWS"] = principal
    return json.dumps({**policy, "Statement": statements})


def _allowing(principal: str) -> str:
    """A bucket policy that lets `principal` read every object (the program's is a TLS-only Deny)."""
    allow = {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": "s3:GetObject", "Resource": "*"}
    return json.dumps({"Version": "2012-10-17", "Statement": [allow]})


def _worker(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def _set_flag(job: dict[str, Any], flag: str, value: str) -> None:
    command = _worker(job)["command"]
    command[command.index(flag) + 1] = value


def _failed(resources: list[Registered]) -> set[str]:
    return {v.policy for v in mandatory(analyze(resources))}


def _fired(resources: list[Registered]) -> set[str]:
    return {v.policy for v in analyze(resources)}


# One change per policy, made where the program makes the thing the policy is about.
MUTATIONS: dict[str, tuple[str, str | None, Callable[[ProgramRun, Registered], Registered]]] = {
    "efa-on-every-network-card": (
        LAUNCH_TEMPLATE,
        "gpu-template",
        _inputs(
            lambda lt: lt.update(networkInterfaces=[i for i in lt["networkInterfaces"] if i["networkCardIndex"] != 5])
        ),
    ),
    "gpu-node-group-one-az": (MANAGED_NODE_GROUP, "gpu-nodes", _second_subnet),
    "launch-template-imdsv2": (
        LAUNCH_TEMPLATE,
        None,
        _inputs(lambda lt: lt["metadataOptions"].update(httpTokens="optional")),
    ),
    "launch-template-imds-hop-limit": (
        LAUNCH_TEMPLATE,
        "gpu-template",
        _inputs(lambda lt: lt["metadataOptions"].update(httpPutResponseHopLimit=2.0)),
    ),
    "role-trust-within-account": (
        ROLE,
        None,
        _inputs(lambda role: role.update(assumeRolePolicy=_trusting(role["assumeRolePolicy"], OTHER_ACCOUNT_ROOT))),
    ),
    "no-public-monitoring-or-etcd": (
        "kubernetes:core/v1:Service",
        None,
        _inputs(lambda s: s["spec"].update(type="LoadBalancer")),
    ),
    "hf-token-only-from-secrets-manager": (
        PYTORCHJOB,
        None,
        _inputs(lambda j: _worker(j)["env"].append({"name": "HUGGING_FACE_HUB_TOKEN", "value": TOKEN})),
    ),
    "pytorchjob-matches-node-type": (
        PYTORCHJOB,
        None,
        _inputs(lambda j: _worker(j)["resources"]["limits"].update({"nvidia.com/gpu": "4"})),
    ),
    "job-memory-fits-gpu": (
        PYTORCHJOB,
        None,
        _inputs(lambda j: (_set_flag(j, "--model", "llama2-70b"), _set_flag(j, "--sharding-strategy", "NO_SHARD"))),
    ),
    "gpu-cost-per-hour-budget": (
        MANAGED_NODE_GROUP,
        "gpu-nodes",
        _inputs(lambda g: g["scalingConfig"].update(minSize=32.0, desiredSize=32.0, maxSize=32.0)),
    ),
    "s3-bucket-private-and-encrypted": (
        PUBLIC_ACCESS_BLOCK,
        None,
        _inputs(lambda block: block.update(restrictPublicBuckets=False)),
    ),
    "s3-bucket-policy-within-account": (
        BUCKET_POLICY,
        None,
        _inputs(lambda policy: policy.update(policy=_allowing(OTHER_ACCOUNT_ROOT))),
    ),
}


@pytest.mark.program
@pytest.mark.parametrize("preview", PREVIEWS)
@pytest.mark.parametrize("policy", sorted(MUTATIONS))
def test_a_changed_registration_of_a_real_stack_fires_exactly_its_policy(policy: str, preview: str) -> None:
    run = preview_run(MUTATED_STACK, preview)
    type_token, name, change = MUTATIONS[policy]
    assert _fired(run.resources) == set()
    assert _fired(_mutated(run, type_token, change, name)) == {policy}


def test_every_policy_of_the_pack_has_a_case_that_fires() -> None:
    from tests.policy.test_trainjob_resources import TRAINJOB_MUTATIONS  # the TrainJob's runtime is its own case

    assert {p.name for p in POLICIES} == set(MUTATIONS) | set(TRAINJOB_MUTATIONS)


# A capacity block's group names its instance type in its launch template only (EKS refuses it in both places).
CAPACITY_BLOCK = {"capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef1"}


@pytest.mark.program
@pytest.mark.parametrize("preview", PREVIEWS)
@pytest.mark.parametrize("policy", ["efa-on-every-network-card", "gpu-node-group-one-az", "gpu-cost-per-hour-budget"])
def test_a_capacity_block_group_is_judged_by_the_type_its_launch_template_names(policy: str, preview: str) -> None:
    gpu = raw_stack_config(MUTATED_STACK)["fsdp-eks:gpuNodes"] | CAPACITY_BLOCK
    run = run_program(MUTATED_STACK, {"fsdp-eks:gpuNodes": gpu}, preview=preview)
    assert run.error is None, run.error
    assert not any("instanceTypes" in g.inputs for g in run.of_type(MANAGED_NODE_GROUP) if g.name == "gpu-nodes")
    type_token, name, change = MUTATIONS[policy]
    assert _fired(run.resources) == set()
    assert _fired(_mutated(run, type_token, change, name)) == {policy}


# Values a preview shows unknown where the program builds them from a resource not yet created: each makes exactly
# its policy report "not checked" (the real stacks' values are known, as the first-preview case above shows).
def _subnets_from_outside(run: ProgramRun, group: Registered) -> Registered:
    """The GPU group's subnet id unknown and read from a resource that is not a subnet of the stack (as a subnet id
    taken from another resource's output would be)."""
    group.inputs["subnetIds"] = [UNKNOWN_MARKER]
    group.property_dependencies["subnetIds"] = [next(iter(run.of_type("aws:ec2/vpc:Vpc"))).urn]
    return group


UNKNOWN_DURING_PREVIEW: dict[str, tuple[str, str | None, Callable[[ProgramRun, Registered], Registered]]] = {
    "launch-template-imdsv2": (
        LAUNCH_TEMPLATE,
        None,
        _inputs(lambda lt: lt["metadataOptions"].update(httpTokens=UNKNOWN_MARKER)),
    ),
    "launch-template-imds-hop-limit": (
        LAUNCH_TEMPLATE,
        None,
        _inputs(lambda lt: lt["metadataOptions"].update(httpPutResponseHopLimit=UNKNOWN_MARKER)),
    ),
    "role-trust-within-account": (ROLE, None, _inputs(lambda role: role.update(assumeRolePolicy=UNKNOWN_MARKER))),
    "efa-on-every-network-card": (
        LAUNCH_TEMPLATE,
        "gpu-template",
        _inputs(lambda lt: lt.update(networkInterfaces=UNKNOWN_MARKER)),
    ),
    "gpu-node-group-one-az": (MANAGED_NODE_GROUP, "gpu-nodes", _subnets_from_outside),
    "pytorchjob-matches-node-type": (
        PYTORCHJOB,
        None,
        _inputs(lambda j: _worker(j)["resources"]["limits"].update({"nvidia.com/gpu": UNKNOWN_MARKER})),
    ),
    "job-memory-fits-gpu": (PYTORCHJOB, None, _inputs(lambda j: _worker(j).update(command=UNKNOWN_MARKER))),
    "no-public-monitoring-or-etcd": (
        "kubernetes:core/v1:Service",
        None,
        _inputs(lambda s: s["spec"].update(type=UNKNOWN_MARKER)),
    ),
    "s3-bucket-private-and-encrypted": (
        PUBLIC_ACCESS_BLOCK,
        None,
        _inputs(lambda block: block.update(blockPublicPolicy=UNKNOWN_MARKER)),
    ),
}


@pytest.mark.program
@pytest.mark.parametrize("policy", sorted(UNKNOWN_DURING_PREVIEW))
def test_a_value_unknown_during_a_first_preview_is_not_checked_by_exactly_its_policy(policy: str) -> None:
    run = preview_run(MUTATED_STACK, "first")
    type_token, name, change = UNKNOWN_DURING_PREVIEW[policy]
    found = mandatory(analyze(_mutated(run, type_token, change, name)))
    assert {v.policy for v in found} == {policy}
    assert all(v.message.startswith(NOT_CHECKED) for v in found), found


def test_every_mandatory_policy_has_a_case_it_cannot_check() -> None:
    from tests.policy.test_trainjob_resources import TRAINJOB_UNKNOWN_DURING_PREVIEW  # the runtime is its own case

    names = {p.name for p in POLICIES if p.enforcement_level == EnforcementLevel.MANDATORY}
    # The HF token policy's unknown cases (command or env unknown at preview) are tests/policy/test_hf_token.py's.
    # A bucket policy unknown at preview is judged at `up` instead (tests/policy/test_s3_grants.py says so).
    judged_at_up = {"hf-token-only-from-secrets-manager", "s3-bucket-policy-within-account"}
    assert names - judged_at_up == set(UNKNOWN_DURING_PREVIEW) | set(TRAINJOB_UNKNOWN_DURING_PREVIEW)
