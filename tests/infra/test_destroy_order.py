"""`pulumi destroy` deletes what uses a thing before the thing: the engine's rule applied to what each stack
registers (tests/harness/destroy_order.py)."""

from __future__ import annotations

from tests.harness.destroy_order import deletion_rounds, dependency_graph, depends_on
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


def _users(run: ProgramRun) -> list[Registered]:
    """The job's objects and everything inside the platform component."""
    (platform,) = run.of_type("fsdp-eks:workloads:Platform")
    by_urn = {r.urn: r for r in run.resources}

    def in_platform(r: Registered) -> bool:
        while r.parent in by_urn:
            if r.parent == platform.urn:
                return True
            r = by_urn[r.parent]
        return False

    return [r for r in run.resources if r.type in JOB_TYPES or in_platform(r)]


def _checkpoint_storage(run: ProgramRun) -> set[str]:
    """The FSx file system and its Lustre rules: only the job's volume uses them."""
    return {r.urn for r in run.resources if r.parent.endswith("fsdp-eks:infra:CheckpointStorage::checkpoints")}


def test_destroy_deletes_the_job_its_volume_and_the_platform_before_what_they_run_on(stack_run: ProgramRun) -> None:
    graph = dependency_graph(stack_run.resources)
    needed, users, storage = _needed(stack_run), _users(stack_run), _checkpoint_storage(stack_run)
    assert needed and any(u.type == JOB_TYPES[0] for u in users)
    missing = [
        f"{user.name} may outlive {need.name}"
        for user in users
        for need in needed
        if (user.type in JOB_TYPES or need.urn not in storage) and not depends_on(graph, user.urn, need.urn)
    ]
    assert missing == []
