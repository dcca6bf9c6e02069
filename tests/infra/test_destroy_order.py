"""`pulumi destroy` deletes what uses a thing before the thing: the engine's rule applied to what each stack
registers (tests/harness/destroy_order.py)."""

from __future__ import annotations

import pytest

from stack.files import load_stack_config
from tests.harness.destroy_order import deletion_rounds, dependency_graph, depends_on, volumes_left_to_drivers
from tests.harness.pulumi_program import ProgramRun, Registered


def _resource(
    name: str,
    *,
    parent: str = "",
    deps: tuple[str, ...] = (),
    custom: bool = True,
    provider: str = "",
    property_deps: dict | None = None,
) -> Registered:
    return Registered(
        "t:m:T", name, name, parent, provider, list(deps), False, [], {}, name, {}, custom, property_deps or {}
    )


def test_a_dependency_on_a_remote_component_reaches_the_children_it_registered_first() -> None:
    component = _resource("component", custom=False)
    child = _resource("child", parent="component")
    user = _resource("user", deps=("component",))
    late_child = _resource("late-child", parent="component")
    graph = dependency_graph([component, child, user, late_child])
    assert depends_on(graph, "user", "child")
    assert not depends_on(graph, "user", "late-child")


def test_parents_providers_and_property_dependencies_order_deletion() -> None:
    resources = [
        _resource("cluster"),
        _resource("provider", deps=("cluster",)),
        _resource("object", provider="provider::0123"),
        _resource("volume", property_deps={"spec": ["object"]}),
        _resource("child", parent="volume"),
    ]
    graph = dependency_graph(resources)
    assert depends_on(graph, "child", "cluster")
    rounds = deletion_rounds(graph)
    assert rounds[0] == ["child"] and rounds[-1] == ["cluster"]


def test_resources_without_a_path_between_them_are_deleted_in_the_same_round() -> None:
    graph = dependency_graph([_resource("driver"), _resource("job"), _resource("cluster")])
    assert deletion_rounds(graph) == [["cluster", "driver", "job"]]
    assert not depends_on(graph, "job", "driver")


# What the job and the platform use while they run; destroy must not delete any of it before them.
RUN_TIME_NEEDS = {
    "aws:eks/addon:Addon": ("aws-ebs-csi-driver", "aws-fsx-csi-driver", "coredns", "vpc-cni", "kube-proxy"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": None,
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": None,
    "aws:ec2/routeTableAssociation:RouteTableAssociation": None,
    "aws:ec2/natGateway:NatGateway": None,
    "aws:fsx/lustreFileSystem:LustreFileSystem": None,
    "eks:index:ManagedNodeGroup": None,
    "eks:index:Cluster": None,
}
JOB_TYPES = (
    "kubernetes:kubeflow.org/v1:PyTorchJob",
    "kubernetes:core/v1:PersistentVolumeClaim",
    "kubernetes:core/v1:PersistentVolume",
)


def _needed(run: ProgramRun) -> list[Registered]:
    return [
        r
        for r in run.resources
        if r.type in RUN_TIME_NEEDS
        and (RUN_TIME_NEEDS[r.type] is None or r.inputs.get("addonName") in RUN_TIME_NEEDS[r.type])
    ]


def _in_platform(run: ProgramRun) -> set[str]:
    """Everything inside the platform component (its Prometheus volume and claim among it)."""
    (platform,) = run.of_type("fsdp-eks:workloads:Platform")
    by_urn = {r.urn: r for r in run.resources}

    def inside(r: Registered) -> bool:
        while r.parent in by_urn:
            if r.parent == platform.urn:
                return True
            r = by_urn[r.parent]
        return False

    return {r.urn for r in run.resources if inside(r)}


def _job_objects(run: ProgramRun) -> set[str]:
    """The job and its checkpoint volume and claim."""
    platform = _in_platform(run)
    return {r.urn for r in run.resources if r.type in JOB_TYPES and r.urn not in platform}


def _users(run: ProgramRun) -> list[Registered]:
    """The job's objects and everything inside the platform component."""
    users = _job_objects(run) | _in_platform(run)
    return [r for r in run.resources if r.urn in users]


def _checkpoint_storage(run: ProgramRun) -> set[str]:
    """The FSx file system and its Lustre rules: only the job's volume uses them."""
    return {r.urn for r in run.resources if r.parent.endswith("fsdp-eks:infra:CheckpointStorage::checkpoints")}


@pytest.mark.program
def test_destroy_deletes_the_job_its_volume_and_the_platform_before_what_they_run_on(stack_run: ProgramRun) -> None:
    graph = dependency_graph(stack_run.resources)
    needed, users, storage = _needed(stack_run), _users(stack_run), _checkpoint_storage(stack_run)
    job = _job_objects(stack_run)
    assert needed and any(u.type == JOB_TYPES[0] for u in users)
    missing = [
        f"{user.name} may outlive {need.name}"
        for user in users
        for need in needed
        if (user.urn in job or need.urn not in storage) and not depends_on(graph, user.urn, need.urn)
    ]
    assert missing == []


# The EKS add-on whose controller provisions and deletes the volumes of a CSI driver.
DRIVER_ADDONS = {"ebs.csi.aws.com": "aws-ebs-csi-driver"}


def _k8s(kind: str, name: str, spec: dict, provider: str = "") -> Registered:
    return Registered(kind, name, name, "", provider, [], False, [], {"metadata": {"name": name}, **spec}, name)


def test_a_dynamically_provisioned_claim_leaves_its_volume_to_the_driver() -> None:
    storage_class = _k8s(
        "kubernetes:storage.k8s.io/v1:StorageClass",
        "gp3",
        {"provisioner": "ebs.csi.aws.com", "reclaimPolicy": "Delete"},
    )
    dynamic = _k8s("kubernetes:core/v1:PersistentVolumeClaim", "dynamic", {"spec": {"storageClassName": "gp3"}})
    chart = _k8s(
        "kubernetes:helm.sh/v3:Release",
        "chart",
        {"values": {"a": {"storageSpec": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}}}}},
    )
    assert volumes_left_to_drivers([storage_class, dynamic, chart]) == [
        (dynamic, "ebs.csi.aws.com"),
        (chart, "ebs.csi.aws.com"),
    ]
    static = _k8s(
        "kubernetes:core/v1:PersistentVolumeClaim", "static", {"spec": {"storageClassName": "gp3", "volumeName": "v"}}
    )
    assert volumes_left_to_drivers([storage_class, static, chart]) == []


@pytest.mark.program
def test_no_volume_is_left_to_a_driver_that_the_same_destroy_deletes(stack_run: ProgramRun) -> None:
    """Nothing waits for a dynamically provisioned volume's deletion, so on the stack's own cluster its driver (an
    add-on, its nodes, its role) could be gone first, and the volume would stay, detached and billed."""
    addons = {r.inputs["addonName"] for r in stack_run.of_type("aws:eks/addon:Addon")}
    left = [
        f"{owner.name} leaves its volume to {provisioner}"
        for owner, provisioner in volumes_left_to_drivers(stack_run.resources)
        if DRIVER_ADDONS.get(provisioner) in addons
    ]
    assert left == []


@pytest.mark.program
def test_prometheus_volume_goes_after_its_claim_and_before_the_driver_and_the_nodes(stack_run: ProgramRun) -> None:
    volumes = stack_run.of_type("aws:ebs/volume:Volume")
    config = load_stack_config(stack_run.stack)
    if not (config.monitoring.enabled and config.monitoring.prometheus_storage_gib):
        assert volumes == []
        return
    graph = dependency_graph(stack_run.resources)
    (volume,) = volumes
    (pv,) = [r for r in stack_run.of_type("kubernetes:core/v1:PersistentVolume") if "prometheus" in r.name]
    (claim,) = [r for r in stack_run.of_type("kubernetes:core/v1:PersistentVolumeClaim") if "prometheus" in r.name]
    (chart,) = [
        r for r in stack_run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == "kube-prometheus-stack"
    ]
    (driver,) = [r for r in stack_run.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "aws-ebs-csi-driver"]
    system_nodes = stack_run.named("eks:index:ManagedNodeGroup", "cluster-system")
    assert pv.inputs["spec"]["csi"]["volumeHandle"] == volume.id
    assert depends_on(graph, chart.urn, claim.urn) and depends_on(graph, claim.urn, pv.urn)
    assert depends_on(graph, pv.urn, volume.urn)
    assert depends_on(graph, volume.urn, driver.urn) and depends_on(graph, volume.urn, system_nodes.urn)
