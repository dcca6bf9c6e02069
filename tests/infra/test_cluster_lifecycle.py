"""What the first `pulumi up`, a Kubernetes upgrade and `pulumi destroy` need of the cluster and its node groups: the
node groups follow the control plane's version, start after and outlive their role's policies, are named within the
provider's limit, and the access entries leave out the role EKS already made one for, whoever runs `pulumi`."""

from __future__ import annotations

import dataclasses

import pytest

from stack.cluster_checks import (
    NODE_GROUP_NAME_PREFIX_MAX_LENGTH,
    creator_problems,
    longest_cluster_name,
    node_group_name_prefix,
    prometheus_volume_problems,
)
from stack.config import KUBERNETES_VERSIONS, ClusterConfig
from stack.endpoint_access import OWN_CIDR_FIX
from stack.fields import NAMESPACE, ConfigError
from stack.files import load_stack_config, raw_stack_config, stack_names
from stack.parse import parse_stack_config
from tests.harness.destroy_order import dependency_graph, depends_on
from tests.harness.fake_eks import CREATOR_ROLE_ARN
from tests.harness.pulumi_program import ProgramRun, run_program
from tests.infra.caller_runs import run_as

NODE_GROUP = "eks:index:ManagedNodeGroup"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ADDON = "aws:eks/addon:Addon"
CLUSTER = f"{NAMESPACE}:cluster"
STACK = "p5-2"


def _attachments_of(run: ProgramRun, role_id: str) -> list[str]:
    return [a.urn for a in run.of_type(ATTACHMENT) if a.inputs["role"] == role_id]


def _role_id(run: ProgramRun, role_arn: str) -> str:
    return next(r.id for r in run.of_type("aws:iam/role:Role") if r.outputs["arn"] == role_arn)


@pytest.mark.program
def test_every_node_group_runs_the_kubernetes_version_of_the_control_plane(stack_run: ProgramRun) -> None:
    """With a launch template pulumi-eks sets no version (the fake models it), and EKS never upgrades the group."""
    version = load_stack_config(stack_run.stack).cluster.kubernetes_version
    groups = stack_run.of_type(NODE_GROUP)
    assert groups
    assert {g.name: g.outputs["nodeGroup"].get("version") for g in groups} == {g.name: version for g in groups}


@pytest.mark.program
def test_a_kubernetes_version_bump_reaches_the_nodes() -> None:
    older = KUBERNETES_VERSIONS[-2]
    raw = raw_stack_config(STACK)
    run = run_program(STACK, {CLUSTER: {**(raw.get(CLUSTER) or {}), "kubernetesVersion": older}})
    assert run.error is None, run.error
    assert {g.outputs["nodeGroup"].get("version") for g in run.of_type(NODE_GROUP)} == {older}


@pytest.mark.program
def test_node_groups_start_after_and_outlive_every_policy_of_their_role(stack_run: ProgramRun) -> None:
    graph = dependency_graph(stack_run.resources)
    for group in stack_run.of_type(NODE_GROUP):
        attachments = _attachments_of(stack_run, group.inputs["nodeRole"])  # the role, passed by its id
        assert len(attachments) == 3, group.name
        assert [a for a in attachments if not depends_on(graph, group.urn, a)] == [], group.name


@pytest.mark.program
def test_add_ons_start_after_and_outlive_the_policies_of_their_pod_identity(stack_run: ProgramRun) -> None:
    graph = dependency_graph(stack_run.resources)
    with_identity = [a for a in stack_run.of_type(ADDON) if a.inputs.get("podIdentityAssociations")]
    assert {a.inputs["addonName"] for a in with_identity} >= {"vpc-cni", "aws-ebs-csi-driver"}
    for addon in with_identity:
        (association,) = addon.inputs["podIdentityAssociations"]
        attachments = _attachments_of(stack_run, _role_id(stack_run, association["roleArn"]))
        assert attachments and all(depends_on(graph, addon.urn, a) for a in attachments), addon.inputs["addonName"]


ACCOUNT_ID = CREATOR_ROLE_ARN.split(":")[4]  # the fake cloud's account
PREVIEW_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/fsdp-eks-ci-preview"  # ci/deploy_policy.py Account's defaults
DEPLOY_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/fsdp-eks-ci-deploy"
PERSON_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/team/alice"
PLATFORM_ADMINS = f"arn:aws:iam::{ACCOUNT_ID}:role/platform/admins"


def session(role_arn: str) -> str:
    """What sts:GetCallerIdentity answers in a session of the role: its name, never its path."""
    return f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{role_arn.rsplit('/', 1)[-1]}/GitHubActions"


def with_cluster(**keys: object) -> dict[str, object]:
    raw = raw_stack_config(STACK)
    return {CLUSTER: {**(raw.get(CLUSTER) or {}), **keys}}


def entries(run: ProgramRun) -> dict[str, str]:
    assert run.error is None, run.error
    return {key: e["principalArn"] for key, e in run.one("eks:index:Cluster").inputs["accessEntries"].items()}


def creator_refusals_of(run: ProgramRun) -> list[str]:
    """The problems a run was refused for that name who creates the cluster."""
    if run.error is None:
        return []
    assert run.error["kind"] == "ConfigError", run.error
    return [p for p in run.error["problems"] if p.startswith("this run creates")]


@pytest.mark.program
@pytest.mark.parametrize("preview", ["update", "first"])
def test_a_preview_as_one_role_and_an_update_as_another_register_the_same_resources(preview: str) -> None:
    """CI previews as the preview role and runs `up --plan` as the deploy role. A cluster created before CI (by the
    fake's creator) whose adminRoleArns lists the deploy role, as docs/ci.md asks: both runs register the deploy
    role's entry, so the plan holds what the update does, and the deploy role keeps its own access."""
    overrides = with_cluster(
        adminRoleArns=[DEPLOY_ROLE, PLATFORM_ADMINS, CREATOR_ROLE_ARN], creatorRoleArn=CREATOR_ROLE_ARN
    )
    if preview == "first":  # a new cluster: CI creates it, as the deploy role
        boundary = f"arn:aws:iam::{ACCOUNT_ID}:policy/fsdp-eks-role-boundary"
        overrides = with_cluster(
            adminRoleArns=[DEPLOY_ROLE, PLATFORM_ADMINS], creatorRoleArn=DEPLOY_ROLE, rolePermissionsBoundary=boundary
        )
    previewed = run_as(session(PREVIEW_ROLE), STACK, overrides, preview)
    updated = run_as(session(DEPLOY_ROLE), STACK, overrides, preview)
    expected = (
        {"admin-0": DEPLOY_ROLE, "admin-1": PLATFORM_ADMINS} if preview == "update" else {"admin-1": PLATFORM_ADMINS}
    )
    assert entries(previewed) == entries(updated) == expected
    # In any order: registrations inside applies and components finish as their inputs resolve.
    assert {r.urn: r.inputs for r in previewed.resources} == {r.urn: r.inputs for r in updated.resources}
    assert len(previewed.resources) == len({r.urn for r in previewed.resources})
    assert previewed.invokes == updated.invokes


@pytest.mark.program
def test_the_creator_gets_no_second_access_entry_whoever_runs_pulumi() -> None:
    """EKS makes the creator's entry itself (bootstrapClusterCreatorAdminPermissions); a second one is refused. The
    creator is the config's, compared by account and role name whatever the path."""
    with_path = CREATOR_ROLE_ARN.replace("role/", "role/team/")  # the same role: names are unique in an account
    overrides = with_cluster(adminRoleArns=[with_path, PLATFORM_ADMINS], creatorRoleArn=CREATOR_ROLE_ARN)
    for caller in (CREATOR_ROLE_ARN, PREVIEW_ROLE):
        run = run_as(session(caller), STACK, overrides)
        assert entries(run) == {"admin-1": PLATFORM_ADMINS}, caller
        assert any(with_path in m["message"] and "no second entry" in m["message"] for m in run.log)


@pytest.mark.program
def test_a_first_up_by_a_role_it_lists_is_refused_with_the_line_that_names_the_creator() -> None:
    """A person creating the cluster with their own role in adminRoleArns: EKS would refuse the stack's second entry
    (ResourceInUseException) after the control plane exists, so the run that creates the cluster is refused before
    any resource, with the one line that avoids it; once the cluster exists, the caller no longer matters."""
    overrides = with_cluster(adminRoleArns=[PERSON_ROLE])
    (problem,) = creator_refusals_of(run_as(session(PERSON_ROLE), STACK, overrides, "first"))
    assert "ResourceInUseException" in problem
    assert f"`pulumi config set --path fsdp-eks:cluster.creatorRoleArn {PERSON_ROLE}`" in problem
    named = run_as(session(PERSON_ROLE), STACK, with_cluster(adminRoleArns=[PERSON_ROLE], creatorRoleArn=PERSON_ROLE))
    assert creator_refusals_of(named) == [] and entries(named) == {}
    first_named = run_as(
        session(PERSON_ROLE), STACK, with_cluster(adminRoleArns=[PERSON_ROLE], creatorRoleArn=PERSON_ROLE), "first"
    )
    assert first_named.error is None, first_named.error
    update = run_as(session(PERSON_ROLE), STACK, overrides, "update")
    assert creator_refusals_of(update) == [] and entries(update) == {"admin-0": PERSON_ROLE}


@pytest.mark.program
def test_a_first_up_by_another_role_than_the_creator_is_refused() -> None:
    """cluster.creatorRoleArn names the deploy role, but a person runs the first `up`: EKS would give the creator's
    entry to the person and none to the deploy role."""
    overrides = with_cluster(adminRoleArns=[DEPLOY_ROLE], creatorRoleArn=DEPLOY_ROLE)
    (problem,) = creator_refusals_of(run_as(session(PERSON_ROLE), STACK, overrides, "first"))
    assert f"Run the first `pulumi up` as {DEPLOY_ROLE}" in problem
    assert f"cluster.creatorRoleArn arn:aws:iam::{ACCOUNT_ID}:role/alice`" in problem
    assert creator_refusals_of(run_as(session(DEPLOY_ROLE), STACK, overrides, "first")) == []


@pytest.mark.program
def test_a_ci_preview_of_a_new_cluster_says_nothing_of_its_own_caller() -> None:
    """In CI the preview runs as the preview role and `up --plan` as the deploy role, which creates the cluster: the
    preview's caller is never the creator, and a refusal for it would stop every new stack
    (ci/deploy_ready.py judges the deploy role's entries instead)."""
    boundary = f"arn:aws:iam::{ACCOUNT_ID}:policy/fsdp-eks-role-boundary"
    overrides = with_cluster(adminRoleArns=[DEPLOY_ROLE], creatorRoleArn=DEPLOY_ROLE, rolePermissionsBoundary=boundary)
    run = run_as(session(PREVIEW_ROLE), STACK, overrides, "first")
    assert run.error is None, run.error
    assert entries(run) == {}


def test_a_user_creating_the_cluster_is_not_offered_as_the_creator_role() -> None:
    cluster = ClusterConfig(admin_role_arns=[DEPLOY_ROLE], creator_role_arn=DEPLOY_ROLE)
    (problem,) = creator_problems(cluster, "fsdp-eks-x", f"arn:aws:iam::{ACCOUNT_ID}:user/alice")
    assert problem.endswith(f"Run the first `pulumi up` as {DEPLOY_ROLE}")
    assert (
        creator_problems(ClusterConfig(admin_role_arns=[DEPLOY_ROLE]), "x", f"arn:aws:iam::{ACCOUNT_ID}:user/a") == []
    )


@pytest.mark.program
def test_a_creator_that_is_not_a_role_arn_is_refused() -> None:
    run = run_program(STACK, with_cluster(creatorRoleArn="admin"))
    assert run.error is not None and run.error["kind"] == "ConfigError"
    (problem,) = run.error["problems"]
    assert problem.startswith("fsdp-eks:cluster.creatorRoleArn: 'admin' is not allowed; expected an IAM role ARN")


@pytest.mark.program
def test_node_group_name_prefixes_fit_the_providers_limit_at_the_longest_cluster_name() -> None:
    longest = "c" * longest_cluster_name()
    assert longest_cluster_name() == 29  # "<name>-system-" within 63 - 26
    prefixes = [node_group_name_prefix(longest, group) for group in ("system", "gpu")]
    assert max(len(p) for p in prefixes) == NODE_GROUP_NAME_PREFIX_MAX_LENGTH
    run = run_program(STACK, {CLUSTER: {"name": longest}})
    assert run.error is None, run.error


@pytest.mark.program
def test_a_cluster_name_too_long_for_its_node_groups_fails_before_any_resource() -> None:
    run = run_program(STACK, {CLUSTER: {"name": "c" * 30}})
    assert run.error is not None and run.error["kind"] == "ConfigError"
    (problem,) = run.error["problems"]
    assert "cluster.name" in problem and "at most 29 characters" in problem and not run.resources


@pytest.mark.program
def test_a_default_cluster_name_too_long_names_the_stack() -> None:
    stack = "a-very-long-stack-name-x"  # fsdp-eks-<stack> is 33 characters
    run = run_program(stack, raw_stack_config(STACK))
    assert run.error is not None
    assert any("default cluster name (fsdp-eks-a-very-long-stack-name-x)" in p for p in run.error["problems"])


@pytest.mark.parametrize("stack", stack_names())
def test_no_shipped_stack_opens_the_api_endpoint_to_the_internet(stack: str) -> None:
    cluster = load_stack_config(stack).cluster
    assert not cluster.endpoint_public_access or all(not c.endswith("/0") for c in cluster.public_access_cidrs)


@pytest.mark.program
def test_an_endpoint_open_to_the_world_is_refused_with_the_line_that_opens_it_to_this_machine() -> None:
    run = run_program(STACK, {CLUSTER: {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}})
    assert run.error is not None
    (problem,) = run.error["problems"]
    assert "publicAccessCidrs: '0.0.0.0/0' is not allowed" in problem and OWN_CIDR_FIX in problem


@pytest.mark.program
def test_an_endpoint_open_to_the_users_own_network_is_public() -> None:
    run = run_program(STACK, {CLUSTER: {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.7/32"]}})
    assert run.error is None, run.error
    inputs = run.one("eks:index:Cluster").inputs
    assert inputs["endpointPublicAccess"] is True and inputs["publicAccessCidrs"] == ["203.0.113.7/32"]


@pytest.mark.program
def test_preview_of_a_private_endpoint_says_how_to_reach_it_in_one_line(stack_run: ProgramRun) -> None:
    # Every shipped stack creates its cluster; an existing cluster's endpoint would not be the stack's to describe.
    assert not load_stack_config(stack_run.stack).cluster.existing, "a stack on an existing cluster needs its own test"
    (warning,) = [w for w in stack_run.warnings() if "is private" in w]
    assert OWN_CIDR_FIX in warning


def test_prometheus_volume_needs_a_system_node_in_its_az() -> None:
    """The volume is in the GPU nodes' AZ; one system node per AZ puts one there (stack/cluster_checks.py)."""
    raw = raw_stack_config(STACK)
    one_node = {**raw, CLUSTER: {**(raw.get(CLUSTER) or {}), "systemNodeCount": 1}}
    with pytest.raises(ConfigError, match=r"cluster.systemNodeCount: 1 is not allowed .* expected at least 2"):
        parse_stack_config(one_node, STACK)
    parse_stack_config({**one_node, f"{NAMESPACE}:monitoring": {"prometheusStorageGiB": 0}}, STACK)
    config = parse_stack_config({**one_node, f"{NAMESPACE}:monitoring": {"prometheusStorageGiB": 0}}, STACK)
    monitored = dataclasses.replace(
        config, monitoring=dataclasses.replace(config.monitoring, prometheus_storage_gib=50)
    )
    existing = dataclasses.replace(monitored, cluster=dataclasses.replace(monitored.cluster, existing=True))
    assert prometheus_volume_problems(monitored) and prometheus_volume_problems(existing) == []


@pytest.mark.program
def test_a_ci_deployed_stack_keeps_its_cluster_name_within_the_deploy_roles_reach() -> None:
    """With the CI boundary set, the deploy role manages only clusters named fsdp-eks-*: another cluster.name would
    fail at CreateCluster after the network is built, so preview refuses it first."""
    boundary = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"
    run = run_program(STACK, {CLUSTER: {"name": "team-gpu", "rolePermissionsBoundary": boundary}})
    assert run.error is not None and run.error["kind"] == "ConfigError"
    (problem,) = run.error["problems"]
    assert "cluster.name" in problem and "'fsdp-eks-'" in problem and not run.resources
    assert run_program(STACK, {CLUSTER: {"name": "fsdp-eks-team", "rolePermissionsBoundary": boundary}}).error is None
    assert run_program(STACK, {CLUSTER: {"name": "team-gpu"}}).error is None  # no CI boundary: any name
