"""The Platform as __main__.py composes it, under mocks for every stack (the shared `stack_run` fixture): on the
cluster's provider, after the GPU nodes, and before the training job, which is therefore deleted first."""

from __future__ import annotations

import pytest

from tests.harness.pulumi_program import ProgramRun, Registered

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

PLATFORM = "fsdp-eks:workloads:Platform"


def platform_of(run: ProgramRun) -> Registered:
    found = run.of_type(PLATFORM)
    assert len(found) == 1, f"__main__.py composes {len(found)} Platforms for stack {run.stack}; expected one"
    (platform,) = found
    return platform


def children(run: ProgramRun, parent: Registered) -> list[Registered]:
    direct = [r for r in run.resources if r.parent == parent.urn]
    return direct + [c for d in direct for c in children(run, d)]


def test_platform_resources_use_the_clusters_kubernetes_provider(stack_run: ProgramRun) -> None:
    platform = platform_of(stack_run)
    providers = {r.urn for r in stack_run.of_type("pulumi:providers:kubernetes")}
    kubernetes = [r for r in children(stack_run, platform) if r.type.startswith("kubernetes:")]
    assert kubernetes
    for r in kubernetes:
        assert r.provider.rsplit("::", 1)[0] in providers, f"{r.name} uses the default provider"


def test_the_gpu_device_plugin_waits_for_the_gpu_node_group(stack_run: ProgramRun) -> None:
    platform = platform_of(stack_run)
    gpu_groups = stack_run.of_type("fsdp-eks:infra:GpuNodeGroup")
    assert gpu_groups, "every stack file builds its cluster and GPU node group"
    gpu_resources = {r.urn for r in children(stack_run, gpu_groups[0])}
    plugin = next(
        r
        for r in children(stack_run, platform)
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["chart"] == "nvidia-device-plugin"
    )
    assert set(plugin.dependencies) & gpu_resources


def test_the_training_job_is_created_after_and_deleted_before_the_training_operator(stack_run: ProgramRun) -> None:
    platform = platform_of(stack_run)
    jobs = [r for r in stack_run.resources if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    assert jobs, "every stack file runs a training job"
    operator = next(r for r in children(stack_run, platform) if r.type == "kubernetes:kustomize/v2:Directory")
    for job in jobs:
        assert operator.urn in job.dependencies, "the PyTorchJob does not wait for the training operator's CRDs"
