"""The training job as a kubeflow.org/v1 PyTorchJob under the Training Operator v1 (job.api pytorchjob). It has
`nodes` Worker replicas of the shared worker pod (workloads/job/pod.py), each one torchrun agent over all of its node's
GPUs, with torchrun's elastic rendezvous on the platform's etcd (or c10d) and the operator's ExitCode restart rule.

Pure functions of a JobSpec returning plain dicts.

    spec = job_spec(load_stack_config("p5-16"))
    manifest = pytorchjob_manifest(spec)
"""

from __future__ import annotations

import copy
from typing import Any

from stack.job_api import PYTORCHJOB_API_VERSION, PYTORCHJOB_KIND
from trainer.base.pod.exits import LAUNCH_MODULE, PERMANENT_EXITS
from trainer.base.pod.staging import STAGE_INPUTS_OPTION
from workloads.job.pod import (
    PREPARE_CHECKPOINTS,
    PYTHON,
    TrainerContainer,
    labels,
    metrics_port,
    trainer_args,
    with_pod_image,
    worker_pod,
)
from workloads.job.shutdown import TERMINATION_GRACE_S, torchrun_shutdown_timeout
from workloads.job.spec import C10D_PORT, JobSpec

# The training operator injects its PET_* rendezvous variables into the container of this name only.
CONTAINER_NAME = "pytorch"
# What the training operator does when a worker's container exits (kubeflow/trainer v1.9.4,
# pkg/controller.v1/common/pod.go ReconcilePods, pkg/util/train/train_util.go IsRetryableExitCode): with ExitCode
# it gives the pod restartPolicy Never (pkg/core/pod.go SetRestartPolicy), creates the pod again when the code is
# 128 or more and fails the whole job on 1 to 127. The launcher ends on exactly these terms (trainer/launch/launcher.py,
# the codes in trainer/base/pod/exits.py): 128 + the signal after SIGTERM (a pod deleted, evicted or drained; torchrun
# has passed it to the workers, which settle their checkpoint first) and EXIT_BACKEND_LOST after a lost rendezvous
# backend (an etcd restart) are created again; 1 once torchrun's --max-restarts are spent, when it closes the
# rendezvous on its way out, fails the job. OnFailure would restart that container in place, into the closed rendezvous
# (RendezvousClosedError), until the restarts of all pods together passed backoffLimit. The operator reads the code of
# the `pytorch` container only; a pod failed by an init container reads as 0xbeef, retryable, so no init container of
# this pod may fail for good (CONTAINER_PERMANENT_EXITS; staging runs in the launcher for that reason).
RESTART_POLICY = "ExitCode"
# The exit codes each container of the worker pod ends with on a failure that no new pod cures
# (local/pytorchjob/restart_policy.py recreation_loops runs every one through the operator's rule; a container not named
# here is taken to have any). The launcher's are final for the operator: it reads them from this container.
# prepare-checkpoints has none: it cannot exit non-zero (prepare_checkpoints_container says why), so only a kill, which
# a new pod may cure, ends it.
CONTAINER_PERMANENT_EXITS: dict[str, tuple[int, ...]] = {CONTAINER_NAME: PERMANENT_EXITS, PREPARE_CHECKPOINTS: ()}


def launcher_command(spec: JobSpec) -> list[str]:
    """`python -m trainer.launch` with torchrun's elastic launch spelled out: the launcher runs torchrun in its own
    process, the container's main one, and maps how it ended onto RESTART_POLICY's two classes. The operator also
    sets the same values as PET_* variables; explicit flags make the command complete on its own, for `kubectl
    describe` and for the local runner. torchrun's default --signals-to-handle includes SIGTERM, which the launcher
    needs: torchrun passes it to the workers and waits --shutdown-timeout for them."""
    r = spec.rendezvous
    return [
        PYTHON,
        "-m",
        LAUNCH_MODULE,
        STAGE_INPUTS_OPTION,  # the launcher's own: staging first, in this container (workloads/job/staging.py)
        f"--nnodes={spec.min_nodes}:{spec.nodes}",
        f"--nproc-per-node={spec.node.gpus}",
        f"--rdzv-backend={r.backend}",
        f"--rdzv-endpoint={r.endpoint}",
        f"--rdzv-id={spec.rendezvous_id}",
        f"--rdzv-conf=join_timeout={r.join_timeout_s}",
        f"--max-restarts={spec.max_restarts}",
        f"--shutdown-timeout={torchrun_shutdown_timeout(TERMINATION_GRACE_S)}",  # SIGTERM to SIGKILL of the workers
        "-m",
        "trainer",
        *trainer_args(spec),
    ]


def pytorchjob_container(spec: JobSpec) -> TrainerContainer:
    # The operator's port for the container (its default, where c10d's store listens), then the metrics port.
    ports = [{"name": "pytorchjob-port", "containerPort": C10D_PORT, "protocol": "TCP"}, metrics_port()]
    return TrainerContainer(CONTAINER_NAME, launcher_command(spec), ports)


def pod_template(spec: JobSpec) -> dict[str, Any]:
    """The Worker replicas' pod: the shared worker pod with the `pytorch` container."""
    return worker_pod(spec, pytorchjob_container(spec))


def pytorchjob_manifest(spec: JobSpec) -> dict[str, Any]:
    """The kubeflow.org/v1 PyTorchJob: `nodes` workers, each one torchrun agent over all of its node's GPUs."""
    r = spec.rendezvous
    return {
        "apiVersion": PYTORCHJOB_API_VERSION,
        "kind": PYTORCHJOB_KIND,
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels(spec)},
        "spec": {
            "nprocPerNode": str(spec.node.gpus),
            "elasticPolicy": {
                "minReplicas": spec.min_nodes,
                "maxReplicas": spec.nodes,
                "maxRestarts": spec.max_restarts,
                "rdzvBackend": r.backend,
                "rdzvHost": r.host,
                "rdzvPort": r.port,
                "rdzvId": spec.rendezvous_id,
                "rdzvConf": [{"key": "join_timeout", "value": str(r.join_timeout_s)}],
            },
            "runPolicy": {
                # Delete pods still running when the job ends; keep finished ones for `kubectl logs`. No
                # ttlSecondsAfterFinished: Pulumi owns the object, and a TTL deletion would make the next
                # `pulumi up` create it again and rerun the training.
                "cleanPodPolicy": "Running",
                # Under ExitCode the operator (v1.9.4, pkg/controller.v1/common/job.go) applies backoffLimit only
                # when it is 0: then a pod killed by a signal fails the job too, as maxRestarts 0 asks.
                "backoffLimit": spec.max_restarts,
            },
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": spec.nodes,
                    # A pod whose torchrun gave up fails the job; one stopped by a signal, or whose rendezvous
                    # backend was lost, is created again.
                    "restartPolicy": RESTART_POLICY,
                    "template": pod_template(spec),
                },
            },
        },
    }


def with_image(manifest: dict[str, Any], image: Any) -> dict[str, Any]:
    """A copy of the PyTorchJob with every container (init containers too) running `image`: the pushed image, which
    the stack learns only after the build (a pulumi Output there)."""
    result = copy.deepcopy(manifest)
    for replica in result["spec"]["pytorchReplicaSpecs"].values():
        with_pod_image(replica["template"]["spec"], image)
    return result
