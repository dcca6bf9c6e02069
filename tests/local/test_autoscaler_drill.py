"""Drills of the GPU node group under the Cluster Autoscaler as the stack configures it, on the model of its source
(local/cluster_autoscaler.py): the job's worker pods as the PyTorchJob renders them, the group's bounds, template
tags and labels as the program sets them, the autoscaler's flags as its chart gets them.

A node the launcher taints as bad is replaced without a person: the worker pod created again lands on a new, healthy
node, and the tainted node, emptied, goes. A finished job's nodes go too, and come back when the next job's pods wait.
Each drill has its control: the flag, the spare or the tags it depends on taken away, the same fault stays stuck.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from local.cluster_autoscaler import Autoscaling, GpuGroup, Pod, Template, resources
from stack.config import StackConfig
from stack.files import load_stack_config
from stack.gpu_autoscaling import NODE_TEMPLATE_RESOURCE_TAG, SCALE_DOWN_UNNEEDED_S, node_template_tags
from stack.names import GPU_TAINT_EFFECT, GPU_TAINT_KEY, GPU_TAINT_VALUE
from stack.node_contract import AUTOSCALER_GPU_LABEL, AUTOSCALER_GPU_TYPES, EFA_LABEL, GPU_NODE_GROUP_LABEL
from trainer.launch.node_taint import bad_node_taint
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec
from workloads.platform.autoscaler import autoscaler_args, autoscaler_values

STACK = "p5-2"
MINUTE = 60.0


def _config(**gpu: Any) -> StackConfig:
    config = load_stack_config(STACK)
    return dataclasses.replace(config, gpu_nodes=dataclasses.replace(config.gpu_nodes, **gpu))


def _template(config: StackConfig, tags: bool = True) -> Template:
    """What the autoscaler reads of a node of the group: the instance type's CPUs, memory and GPUs, the node group's
    node-template tags, labels and taint (infra/gpu_nodes.py sets them from the same functions)."""
    gpu = config.gpu_nodes
    instance = gpu.instance
    extra = {k.removeprefix(NODE_TEMPLATE_RESOURCE_TAG): v for k, v in node_template_tags(gpu).items()} if tags else {}
    label_key, label_value = GPU_NODE_GROUP_LABEL
    return Template(
        labels={
            label_key: label_value,
            EFA_LABEL: "true",
            AUTOSCALER_GPU_LABEL: AUTOSCALER_GPU_TYPES[instance.gpu_chip],
        },
        taints=({"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT},),
        allocatable=resources(
            {"cpu": instance.vcpus, "memory": f"{instance.memory_gib}Gi", "nvidia.com/gpu": instance.gpus, **extra}
        ),
    )


def _autoscaling(config: StackConfig, status_taint: bool = True) -> Autoscaling:
    (group,) = autoscaler_values(config, "eks-gpu-asg")["autoscalingGroups"]
    args = autoscaler_args()
    assert args["scale-down-unneeded-time"] == f"{SCALE_DOWN_UNNEEDED_S // 60}m"
    taints = (args["status-taint"],) if status_taint else ()
    return Autoscaling(group["minSize"], group["maxSize"], SCALE_DOWN_UNNEEDED_S, status_taints=taints)


def _worker(config: StackConfig, name: str) -> Pod:
    """A worker pod as the PyTorchJob renders it: its requests and its tolerations."""
    spec = pytorchjob_manifest(job_spec(config))["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = [c for c in spec["containers"] if c.get("resources")]
    return Pod(name, resources(container["resources"]["requests"]), tuple(spec.get("tolerations", [])))


def _running(config: StackConfig, status_taint: bool = True) -> GpuGroup:
    """The group with its count of nodes up and a worker pod on each."""
    group = GpuGroup(_template(config), _autoscaling(config, status_taint))
    for index in range(config.gpu_nodes.count):
        group.launch()
        group.pods.append(_worker(config, f"worker-{index}"))
    group.step(MINUTE)
    assert all(p.phase == "Running" for p in group.pods) and len(group.nodes) == config.gpu_nodes.count
    return group


def _bad_node_fault(group: GpuGroup, config: StackConfig) -> tuple[str, Pod]:
    """The launcher taints the first node and its pod exits 201; the operator creates the pod again."""
    bad = group.nodes[0]
    bad.taints.append(bad_node_taint("preflight"))
    (failed,) = [p for p in group.pods if p.node == bad.name]
    failed.phase = "Failed"
    again = _worker(config, failed.name)
    group.pods.append(again)
    return bad.name, again


def test_a_pod_kept_off_a_bad_node_lands_on_a_new_healthy_node_and_the_bad_node_goes() -> None:
    config = _config()
    group = _running(config)
    bad, again = _bad_node_fault(group, config)
    group.step(MINUTE)  # the tainted node is the group's first, so the autoscaler's template is built from it
    assert again.phase == "Running" and again.node not in (bad, None)
    assert "bad-node" not in str(group.node(again.node).taints)
    for _ in range(int((SCALE_DOWN_UNNEEDED_S + 10 * MINUTE) // MINUTE) + 1):
        group.step(MINUTE)
    assert bad not in [n.name for n in group.nodes] and len(group.nodes) == config.gpu_nodes.count
    assert all(p.phase == "Running" for p in group.pods if p.phase != "Failed")


def test_without_the_status_taint_the_template_copies_the_bad_taint_and_nothing_is_added() -> None:
    config = _config()
    group = _running(config, status_taint=False)
    _, again = _bad_node_fault(group, config)
    group.step(MINUTE)
    assert again.phase == "Pending" and len(group.nodes) == config.gpu_nodes.count
    assert any("a new node would not fit it" in e for e in group.events)


def test_without_a_spare_the_pod_waits_for_a_person_as_before() -> None:
    config = _config(spares=0, keep_idle_nodes=True)
    group = _running(config)
    _, again = _bad_node_fault(group, config)
    group.step(MINUTE)
    assert again.phase == "Pending" and any("at its max" in e for e in group.events)


def test_a_finished_jobs_nodes_go_and_come_back_for_the_next_job() -> None:
    config = _config()
    group = _running(config)
    for pod in group.pods:
        pod.phase = "Succeeded"
    for _ in range(int(SCALE_DOWN_UNNEEDED_S // MINUTE) + 2):
        group.step(MINUTE)
    assert group.nodes == [], group.events  # gpuNodes.keepIdleNodes false: the group goes to 0
    group.pods += [_worker(config, f"run-2-worker-{i}") for i in range(config.gpu_nodes.count)]
    group.step(MINUTE)  # no node left: the template is the group's own, from its tags
    assert len(group.nodes) == config.gpu_nodes.count
    assert all(p.phase == "Running" for p in group.pods if p.name.startswith("run-2"))


def test_without_the_node_template_tags_a_group_at_zero_never_scales_up() -> None:
    """EFA devices and huge pages come from the device plugin and the user data: only the tags tell the autoscaler."""
    config = _config()
    group = GpuGroup(_template(config, tags=False), _autoscaling(config))
    group.pods.append(_worker(config, "worker-0"))
    group.step(MINUTE)
    assert group.nodes == [] and any("would not fit" in e for e in group.events)


def test_a_stack_that_keeps_idle_nodes_keeps_them() -> None:
    config = _config(keep_idle_nodes=True)
    group = _running(config)
    for pod in group.pods:
        pod.phase = "Succeeded"
    for _ in range(int(SCALE_DOWN_UNNEEDED_S // MINUTE) * 2):
        group.step(MINUTE)
    assert len(group.nodes) == config.gpu_nodes.count
