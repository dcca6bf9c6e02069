"""The PyTorchJob of every stack file: valid for the training operator's API and for Kubernetes, and asking each
node for exactly what the catalog says it has."""

from __future__ import annotations

import copy
import json
import re
from fractions import Fraction
from typing import Any

import kubernetes_validate
import pytest
from kubeflow.training import ApiClient

from infra.gpu_nodes import GPU_NODE_GROUP_LABEL, GPU_TAINT, hugepages_user_data
from sizing.catalog import CATALOG
from stack.config import KUBERNETES_VERSIONS
from stack.job_api import rendezvous_backend
from stack.names import ETCD_CLIENT_PORT, ETCD_SERVICE_HOST
from tests.harness.text import must_fullmatch
from trainer.base.pod.exits import LAUNCH_MODULE
from trainer.base.pod.staging import split_launcher_options
from workloads.job.pod import PREPARE_CHECKPOINTS, namespace_manifest, service_account_manifest
from workloads.job.pytorchjob import launcher_command, pytorchjob_manifest
from workloads.job.shutdown import TERMINATION_GRACE_S, torchrun_shutdown_timeout

from .job_stacks import STACKS, config_of, spec_of

pytestmark = pytest.mark.parametrize("stack", STACKS)

KUBERNETES_VERSION = KUBERNETES_VERSIONS[-1]


def sdk_round_trip(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest read into the kubeflow-training SDK's models and written back out: a field the models do not
    know (a misspelling, a field of another API version) is dropped on the way."""

    class Response:
        data = json.dumps(manifest)

    client = ApiClient()
    serialized = client.sanitize_for_serialization(client.deserialize(Response, "KubeflowOrgV1PyTorchJob"))
    assert isinstance(serialized, dict)
    return serialized


def worker(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["pytorchReplicaSpecs"]["Worker"]


def trainer_container(manifest: dict[str, Any]) -> dict[str, Any]:
    (container,) = worker(manifest)["template"]["spec"]["containers"]
    return container


def env_of(manifest: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer_container(manifest)["env"]}


def test_manifest_round_trips_through_the_kubeflow_sdk_models(stack: str) -> None:
    spec = spec_of(stack)
    manifest = pytorchjob_manifest(spec)
    assert sdk_round_trip(manifest) == manifest


def test_the_round_trip_catches_a_misspelt_field(stack: str) -> None:
    spec = spec_of(stack)
    manifest = copy.deepcopy(pytorchjob_manifest(spec))
    manifest["spec"]["elasticPolicy"]["rdzvHots"] = manifest["spec"]["elasticPolicy"].pop("rdzvHost")
    assert sdk_round_trip(manifest) != manifest


def test_pod_template_passes_the_strict_kubernetes_schema(stack: str) -> None:
    spec = spec_of(stack)
    pod_template = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": spec.name, "namespace": spec.namespace},
        "template": worker(pytorchjob_manifest(spec))["template"],
    }
    kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)


def test_the_strict_schema_rejects_an_unknown_pod_field(stack: str) -> None:
    spec = spec_of(stack)
    template = copy.deepcopy(worker(pytorchjob_manifest(spec))["template"])
    template["spec"]["nodeSelectors"] = template["spec"].pop("nodeSelector")
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": template}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod_template, KUBERNETES_VERSION, strict=True)


def test_service_account_and_namespace_pass_the_strict_kubernetes_schema(stack: str) -> None:
    spec = spec_of(stack)
    for manifest in (service_account_manifest(spec), namespace_manifest(spec)):
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_gpu_and_efa_requests_match_the_catalog(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    instance = CATALOG[config.gpu_nodes.instance_type]
    manifest = pytorchjob_manifest(spec)
    resources = trainer_container(manifest)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == str(instance.gpus)
    assert manifest["spec"]["nprocPerNode"] == str(instance.gpus)
    assert worker(manifest)["replicas"] == config.gpu_nodes.count
    if config.gpu_nodes.efa_enabled:
        assert resources["limits"]["vpc.amazonaws.com/efa"] == str(instance.efa_interfaces)
    else:
        assert "vpc.amazonaws.com/efa" not in resources["limits"]
    assert resources["requests"] == resources["limits"]  # Guaranteed QoS


def _node_hugepage_pool_mib() -> int:
    """The pool the GPU nodes' user data reserves (vm.nr_hugepages, in 2 MiB pages)."""
    (pages,) = re.findall(r"sysctl -w vm.nr_hugepages=(\d+)", hugepages_user_data())
    return int(pages) * 2


def test_efa_pods_request_the_nodes_whole_huge_page_pool(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    limits = trainer_container(pytorchjob_manifest(spec))["resources"]["limits"]
    if not config.gpu_nodes.efa_enabled:
        assert "hugepages-2Mi" not in limits
        return
    # One training pod per node: a page of the pool it does not request is memory no pod can use.
    assert int(limits["hugepages-2Mi"].removesuffix("Mi")) == _node_hugepage_pool_mib()


_SUFFIXES = {
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
}


def quantity(text: str) -> Fraction:
    """A Kubernetes resource quantity ("100m", "64Mi", "1843Gi", "190"), exactly."""
    number, suffix = must_fullmatch(r"([0-9.]+)([a-zA-Z]*)", text).groups()
    return Fraction(number) * _SUFFIXES[suffix]


def qos_class(pod_spec: dict[str, Any]) -> str:
    """The pod's QoS class by Kubernetes' own rule (kubernetes/kubernetes pkg/apis/core/v1/helper/qos/qos.go
    GetPodQOS): init containers count like the others; Guaranteed needs CPU and memory limits on every container and
    the summed requests equal to the summed limits; only CPU and memory matter."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in [*pod_spec["containers"], *pod_spec.get("initContainers", [])]:
        resources = container.get("resources", {})
        for kind, total in (("requests", requests), ("limits", limits)):
            for name, text in resources.get(kind, {}).items():
                if name in ("cpu", "memory") and quantity(text) > 0:
                    total[name] = total.get(name, Fraction(0)) + quantity(text)
        found = {n for n, t in resources.get("limits", {}).items() if n in ("cpu", "memory") and quantity(t) > 0}
        guaranteed = guaranteed and found == {"cpu", "memory"}
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed and requests == limits else "Burstable"


def test_worker_pods_are_guaranteed_qos(stack: str) -> None:
    # The last pods the kubelet evicts under memory pressure; on stacks with a checkpoint claim the init container
    # counts too.
    pod_spec = worker(pytorchjob_manifest(spec_of(stack)))["template"]["spec"]
    assert qos_class(pod_spec) == "Guaranteed"


def test_a_container_without_limits_makes_the_pod_burstable(stack: str) -> None:
    pod_spec = copy.deepcopy(worker(pytorchjob_manifest(spec_of(stack)))["template"]["spec"])
    pod_spec.setdefault("initContainers", []).append({"name": "x", "image": "x"})
    assert qos_class(pod_spec) == "Burstable"


def test_cpu_and_memory_leave_room_for_the_node_daemons(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    instance = config.gpu_nodes.instance
    limits = trainer_container(pytorchjob_manifest(spec))["resources"]["limits"]
    hugepage_pool_gib = _node_hugepage_pool_mib() / 1024 if config.gpu_nodes.efa_enabled else 0
    assert int(limits["cpu"]) <= instance.vcpus - 2
    assert int(limits["memory"].removesuffix("Gi")) + hugepage_pool_gib <= instance.memory_gib - 2


def test_pods_land_on_the_gpu_node_group_and_tolerate_its_taint(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    pod = worker(pytorchjob_manifest(spec))["template"]["spec"]
    label, value = GPU_NODE_GROUP_LABEL
    assert pod["nodeSelector"] == {label: value, "node.kubernetes.io/instance-type": config.gpu_nodes.instance_type}
    effect = {"NO_SCHEDULE": "NoSchedule"}[GPU_TAINT["effect"]]  # EKS API spelling -> Kubernetes spelling
    expected = {"key": GPU_TAINT["key"], "operator": "Equal", "value": GPU_TAINT["value"], "effect": effect}
    assert expected in pod["tolerations"]


def test_shared_memory_is_a_memory_backed_volume(stack: str) -> None:
    spec = spec_of(stack)
    pod = worker(pytorchjob_manifest(spec))["template"]["spec"]
    dshm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert dshm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]


def test_checkpoints_are_on_shared_storage_wherever_the_stack_has_it(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    pod = worker(pytorchjob_manifest(spec))["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "checkpoints")
    if config.gpu_nodes.count > 1:
        assert config.storage.fsx or config.job.checkpoint_claim  # the config refuses anything else
    if config.storage.fsx or config.job.checkpoint_claim:
        assert volume["persistentVolumeClaim"]["claimName"] == spec.checkpoint.claim
        assert pod["initContainers"][0]["name"] == "prepare-checkpoints"
    else:
        assert volume == {"name": "checkpoints", "emptyDir": {}}


def test_the_pods_name_the_token_secret_where_the_stack_names_a_secret_and_always_the_region(stack: str) -> None:
    config, env = config_of(stack), env_of(pytorchjob_manifest(spec_of(stack)))
    if config.job.hf_token_secret is None:
        assert "HF_TOKEN_SECRET" not in env
    else:
        assert env["HF_TOKEN_SECRET"] == config.job.hf_token_secret
    assert env["AWS_REGION"] == config.region  # every AWS client of the pod: the token's secret, S3
    assert "HF_TOKEN" not in env  # the launcher sets it, from Secrets Manager (trainer/base/pod/hub_token.py)


def test_the_pods_run_as_the_jobs_own_service_account(stack: str) -> None:
    spec = spec_of(stack)
    account = service_account_manifest(spec)["metadata"]
    assert worker(pytorchjob_manifest(spec))["template"]["spec"]["serviceAccountName"] == account["name"] != "default"
    assert account["namespace"] == spec.namespace


def test_efa_settings_fit_the_instance_type(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    env = env_of(pytorchjob_manifest(spec))
    if not config.gpu_nodes.efa_enabled:
        assert not [name for name in env if name.startswith("FI_")]
        return
    assert env["FI_PROVIDER"] == "efa"
    rdma = config.gpu_nodes.instance_type.split(".")[0] in {"p4d", "p4de", "p5", "p5e", "p5en"}
    assert env.get("FI_EFA_USE_DEVICE_RDMA") == ("1" if rdma else None)


def test_nccl_must_use_the_ofi_plugin_on_efa_nodes(stack: str) -> None:
    # "Libfabric": the network name aws-ofi-nccl registers (src/nccl_ofi_interface_nvidia.cpp, since 1.13). With
    # NCCL_NET set NCCL fails to initialise rather than fall back to sockets; without EFA it must stay unset.
    env = env_of(pytorchjob_manifest(spec_of(stack)))
    assert env.get("NCCL_NET") == ("Libfabric" if config_of(stack).gpu_nodes.efa_enabled else None)


def test_diagnostic_switches_reach_the_environment(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    env = env_of(pytorchjob_manifest(spec))
    assert env["NCCL_DEBUG"] == config.job.nccl_debug
    assert env["TORCH_DISTRIBUTED_DEBUG"] == config.job.distributed_debug


def test_elastic_policy_and_launcher_command_agree(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    manifest = pytorchjob_manifest(spec)
    policy = manifest["spec"]["elasticPolicy"]
    command = trainer_container(manifest)["command"]
    assert command == launcher_command(spec)
    assert policy["minReplicas"] == (config.job.min_nodes or config.gpu_nodes.count)
    assert policy["maxReplicas"] == config.gpu_nodes.count
    assert policy["maxRestarts"] == config.job.max_restarts
    assert f"--nnodes={policy['minReplicas']}:{policy['maxReplicas']}" in command
    assert f"--rdzv-backend={policy['rdzvBackend']}" in command
    assert f"--rdzv-endpoint={policy['rdzvHost']}:{policy['rdzvPort']}" in command
    assert f"--rdzv-id={policy['rdzvId']}" in command
    assert f"--max-restarts={policy['maxRestarts']}" in command


def test_a_worker_whose_torchrun_gave_up_fails_the_job(stack: str) -> None:
    # ExitCode: the operator fails the job on exit codes 1-127 (the launcher's after torchrun's last restart) and
    # creates the pod again only for 128 and up; OnFailure would restart the container into the closed rendezvous.
    assert worker(pytorchjob_manifest(spec_of(stack)))["restartPolicy"] == "ExitCode"


def test_the_pod_runs_torchrun_through_the_launcher_which_gets_sigterm(stack: str) -> None:
    from torch.distributed.run import parse_args  # torchrun's own parser, which the launcher hands the arguments

    command = trainer_container(pytorchjob_manifest(spec_of(stack)))["command"]
    assert command[:3] == ["python", "-m", LAUNCH_MODULE]
    _, torchrun_args = split_launcher_options(command[3:])  # the launcher's own options come first
    args = parse_args(torchrun_args)
    # torchrun handles SIGTERM (the kubelet stopping the pod): it passes it to the workers, waits --shutdown-timeout
    # for them to settle their checkpoint, and the launcher exits 143, which the operator retries.
    assert {"SIGTERM", "SIGINT"} <= set(args.signals_to_handle.split(","))
    assert args.shutdown_timeout == torchrun_shutdown_timeout(TERMINATION_GRACE_S)
    assert (args.module, args.training_script) == (True, "trainer")


def test_etcd_rendezvous_points_at_the_platforms_etcd(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    policy = pytorchjob_manifest(spec)["spec"]["elasticPolicy"]
    assert rendezvous_backend(config.job.api, config.job.rdzv_backend) == "etcd"  # every stack file uses the default
    assert (policy["rdzvBackend"], policy["rdzvHost"], policy["rdzvPort"]) == (
        "etcd-v2",
        ETCD_SERVICE_HOST,
        ETCD_CLIENT_PORT,
    )


def test_peak_flops_for_mfu_come_from_the_catalog(stack: str) -> None:
    spec = spec_of(stack)
    config = config_of(stack)
    command = trainer_container(pytorchjob_manifest(spec))["command"]
    peak_tflops = float(command[command.index("--peak-tflops") + 1])
    assert peak_tflops * 1e12 == config.gpu_nodes.instance.peak_bf16_flops_per_gpu


def test_pods_run_as_the_images_non_root_user(stack: str) -> None:
    spec = spec_of(stack)
    pod = worker(pytorchjob_manifest(spec))["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_launcher_stages_the_inputs_in_the_trainers_container(stack: str) -> None:
    """Staging runs where the operator reads the exit code: a staging failure is the launcher's exit 4, which fails
    the job, not an init container's, which the operator reads as 0xbeef and retries forever."""
    command = trainer_container(pytorchjob_manifest(spec_of(stack)))["command"]
    options, _ = split_launcher_options(command[3:])
    assert options.stage_inputs


def test_no_init_container_stages_and_only_the_run_directory_is_prepared_before_the_trainer(stack: str) -> None:
    pod = worker(pytorchjob_manifest(spec_of(stack)))["template"]["spec"]
    names = [container["name"] for container in pod.get("initContainers", [])]
    assert names == ([PREPARE_CHECKPOINTS] if spec_of(stack).checkpoint.shared else [])
