"""Resource properties as the engine hands them to the pack (camelCase, numbers as floats), for the unit tests:
passing ones built like the program builds them, and single mutations of them that a policy must refuse."""

from __future__ import annotations

import copy
from typing import Any

from policy.props import StackResource
from sizing.catalog import CATALOG
from stack.files import load_stack_config
from workloads.job.pytorchjob import pytorchjob_manifest
from workloads.job.spec import job_spec

TEMPLATE_URN = "urn:pulumi:s::fsdp-eks::fsdp-eks:infra:GpuNodeGroup$aws:ec2/launchTemplate:LaunchTemplate::gpu-template"
GROUP_URN = (
    "urn:pulumi:s::fsdp-eks::fsdp-eks:infra:GpuNodeGroup$eks:index:ManagedNodeGroup"
    "$aws:eks/nodeGroup:NodeGroup::gpu-nodes"
)
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def efa_interfaces(instance_type: str) -> list[dict[str, Any]]:
    """The layout infra/gpu_nodes.py declares: card 0 'efa' at device 0, the others 'efa-only' at device 0 where
    supported, else 'efa' at device 1."""
    instance = CATALOG[instance_type]
    interfaces = [{"networkCardIndex": 0.0, "deviceIndex": 0.0, "interfaceType": "efa"}]
    for card in range(1, instance.efa_interfaces):
        kind, device = ("efa-only", 0.0) if instance.efa_only_supported else ("efa", 1.0)
        interfaces.append({"networkCardIndex": float(card), "deviceIndex": device, "interfaceType": kind})
    return interfaces


def launch_template(instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    return {
        "networkInterfaces": efa_interfaces(instance_type) if CATALOG[instance_type].supports_efa else None,
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1.0},
    }


def node_group(instance_type: str = "p5.48xlarge", nodes: int = 2, subnets: int = 1) -> dict[str, Any]:
    return {
        "instanceTypes": [instance_type],
        "subnetIds": [f"subnet-{i}" for i in range(subnets)],
        "launchTemplate": {"id": "lt-0123", "version": "1"},
        "scalingConfig": {"minSize": float(nodes), "desiredSize": float(nodes), "maxSize": float(nodes)},
    }


def node_group_resources(
    instance_type: str = "p5.48xlarge", template: dict[str, Any] | None = None, via_property_dependencies: bool = True
) -> list[StackResource]:
    """A launch template and the node group launched from it, linked as the engine links them."""
    group = StackResource(
        NODE_GROUP,
        GROUP_URN,
        node_group(instance_type),
        dependencies=(TEMPLATE_URN,),
        property_dependencies={"launchTemplate": (TEMPLATE_URN,)} if via_property_dependencies else {},
    )
    lt = StackResource(
        "aws:ec2/launchTemplate:LaunchTemplate",
        TEMPLATE_URN,
        launch_template(instance_type) if template is None else template,
    )
    return [lt, group]


def pytorchjob(stack: str = "p5-16") -> dict[str, Any]:
    """The PyTorchJob's inputs as the job component registers them: apiVersion, kind, metadata, spec."""
    return copy.deepcopy(pytorchjob_manifest(job_spec(load_stack_config(stack), image="registry.example/trainer:1")))


def worker_container(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def set_trainer_flag(job: dict[str, Any], flag: str, value: str) -> dict[str, Any]:
    """The job with one trainer flag set: in place, or appended (the trainer's flags end the command) when the
    manifest leaves it at the trainer's default."""
    command = worker_container(job)["command"]
    if flag in command:
        command[command.index(flag) + 1] = value
    else:
        command += [flag, value]
    return job
