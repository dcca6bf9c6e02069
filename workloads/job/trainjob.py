"""The training job as Kubeflow Trainer v2 objects (job.api trainjob). A ClusterTrainingRuntime holds the worker pod,
and the TrainJob runs it on `nodes` nodes.

Pure functions of a JobSpec. The pod is the shared worker pod (workloads/job/pod.py): the same init containers,
/dev/shm, checkpoint volume, service account, token secret's name, EFA/GPU/huge-page resources, toleration, node
selector and labels (so the PodMonitor and the dashboards find the pods whichever API ran them). What differs, with
the facts behind it (kubeflow/trainer v2.3.0 and kubernetes-sigs/jobset v0.12.0):

- Names. The trainer step is the replicated job whose Job template carries the label
  trainer.kubeflow.org/trainjob-ancestor-step=trainer, with replicas 1 and a container named "node"
  (pkg/constants/constants.go; pkg/webhooks/trainingruntime_webhook.go validateReplicatedJobs). The replicated job
  is named "node" too: the torch plugin points PET_MASTER_ADDR at "<job>-node-0-0.<job>" (plugins/torch/torch.go).
- Rendezvous. The torch plugin sets PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job's completion index),
  PET_MASTER_ADDR and PET_MASTER_PORT (29500) on that container; torchrun reads PET_<flag> for every flag it is not
  given (torch/distributed/argparse_util.py env) and, with no --rdzv-backend, rendezvouses statically on the master
  address (torch/distributed/run.py). The command names none of these, so the TrainJob's numbers are the only ones.
- Restarts. Trainer v2 has no elastic policy since v2.2 and sets no failure policy; the JobSet's own, set here, is
  what restarts: every pod failure fails its Job (restartPolicy Never, backoffLimit 0), and the JobSet then
  recreates all Jobs, every pod of the gang (the default action RestartJobSet, counted against maxRestarts;
  pkg/controllers/failure_policy.go), which start a fresh static rendezvous and resume from the last checkpoint.
  A single replaced pod could not rejoin: a static rendezvous is formed once, and the survivors' workers fail with
  it. Two kinds of pod failure are told apart, each by a podFailurePolicy rule FailJob (the Job's reason
  PodFailurePolicy, its message naming the container's exit code or the pod's condition and the rule's index;
  kubernetes pkg/controller/job/pod_failure_policy.go) and a JobSet rule matching that reason and message
  (onJobFailureReasons, onJobFailureMessagePatterns):
  - the launcher's final exits (trainer/base/pod/exits.py FINAL_EXITS: bad arguments, checkpoint storage full,
    staging failed) fail the JobSet at once (FailJobSet): a restart would reload the model to fail the same way;
  - a pod with the condition DisruptionTarget (evicted for a node-group update or drain, preempted, deleted at
    the end of a capacity block) restarts the gang with RestartJobSetAndIgnoreMaxRestarts: a disruption the
    operator chose does not use up maxRestarts. Kubernetes sets that condition for node faults too (a NotReady
    node's pods deleted, node-pressure eviction), so the launcher bounds restarts of any kind: past
    job.maxRestarts + job.maxDisruptionRestarts, read from JobSet's restart-attempt label, it starts nothing and
    exits with a final code (trainer/launch/gang.py).
  The launcher's exit 1 (workers failed, torchrun's restarts spent) is not final: under a static rendezvous that
  is also how the survivors of a lost node end, and their Job failure would end the run. Nor is the failure of an
  init container without a rule of its own (prepare-checkpoints): the pod fails with its node container never run,
  no rule matches, and the Job fails on backoffLimit 0, a counted restart. local/trainjob/jobset_policy.py models all of
  it, and local/trainjob/admission.py the webhooks these objects must pass.
"""

from __future__ import annotations

import copy
from typing import Any

from stack.job_api import (
    ANCESTOR_LABEL,
    RUNTIME_KIND,
    TRAINER_ANCESTOR,
    TRAINER_API_GROUP,
    TRAINER_API_VERSION,
    TRAINJOB_KIND,
)
from trainer.base.pod.exits import FINAL_EXITS, LAUNCH_MODULE
from trainer.base.pod.gang_restarts import RESTART_ATTEMPT_VARIABLE, RESTART_LIMIT_VARIABLE
from trainer.base.pod.staging import STAGE_INPUTS_OPTION
from workloads.job.node_access import node_access_objects
from workloads.job.pod import (
    PYTHON,
    TrainerContainer,
    labels,
    metrics_port,
    namespace_manifest,
    service_account_manifest,
    trainer_args,
    with_pod_image,
    worker_pod,
)
from workloads.job.shutdown import TERMINATION_GRACE_S, torchrun_shutdown_timeout
from workloads.job.spec import JobSpec

# kubeflow/trainer v2.3.0 pkg/constants/constants.go: Node.
NODE = "node"
# The Kubeflow SDK lists a runtime by this label (docs/operator-guides/runtime.md, "Framework Label Requirement").
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
# The torch plugin's environment (TorchRunReservedEnvNames): a TrainJob that sets one is rejected.
TRAINER_V2_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
RUN_ID_ANNOTATION = "fsdp-eks/run-id"
# JobSet's label on every pod of an attempt: its status.restarts, counted restarts or not (kubernetes-sigs/jobset
# v0.12.0 pkg/constants/constants.go RestartsKey; pkg/controllers/jobset_controller.go labelAndAnnotateObject).
JOBSET_RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# The JobSet's rules: names JobSet's webhook accepts (^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most 128
# characters; kubernetes-sigs/jobset v0.12.0 pkg/webhooks/jobset_webhook.go), and the reason a Job failed by a
# podFailurePolicy rule FailJob carries (batch/v1 JobReasonPodFailurePolicy).
FAIL_RULE = "finalExit"
DISRUPTION_RULE = "voluntaryDisruption"
POD_FAILURE_POLICY_REASON = "PodFailurePolicy"
# The pod condition set on a pod stopped for a disruption: eviction (a drain), preemption, taint-based deletion.
DISRUPTION_TARGET = "DisruptionTarget"


def trainjob_launcher_command(spec: JobSpec) -> list[str]:
    """The launcher (trainer/launch/launcher.py) with only what Trainer v2 does not set: torchrun takes the node count,
    processes per node, node rank and master address from the PET_* variables. --stage-inputs: the launcher stages
    the trainer's inputs in this container first and exits 4 if that fails (trainer/base/pod/staging.py), which the
    runtime's podFailurePolicy makes final. --rdzv-conf=timeout is the static
    rendezvous' wait for every node (its TCPStore's timeout, torch/distributed/elastic/rendezvous/
    static_tcp_rendezvous.py), the same join timeout as the PyTorchJob's. --max-restarts=0: a static group cannot
    re-form around a lost node, so torchrun does not retry; the JobSet restarts the gang."""
    return [
        PYTHON,
        "-m",
        LAUNCH_MODULE,
        STAGE_INPUTS_OPTION,
        f"--rdzv-conf=timeout={spec.rendezvous.join_timeout_s}",
        "--max-restarts=0",
        f"--shutdown-timeout={torchrun_shutdown_timeout(TERMINATION_GRACE_S)}",  # SIGTERM to SIGKILL of the workers
        "-m",
        "trainer",
        *trainer_args(spec),
    ]


def gang_restart_env(spec: JobSpec) -> tuple[dict[str, Any], ...]:
    """The pod's JobSet restart attempt (its label, through the downward API) and the bound on it, which the launcher
    reads (trainer/launch/gang.py): the trainer's restart count, and the end of a gang restarted without end."""
    label = {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_RESTART_LABEL}']"}}
    limit = spec.max_restarts + spec.max_disruption_restarts
    return (
        {"name": RESTART_ATTEMPT_VARIABLE, "valueFrom": label},
        {"name": RESTART_LIMIT_VARIABLE, "value": str(limit)},
    )


def node_pod_template(spec: JobSpec) -> dict[str, Any]:
    """The shared worker pod (workloads/job/pod.py) as Trainer v2's "node": its container named "node", its command
    the TrainJob's, its ports the metrics port alone (the torch plugin adds 29500), the gang's restart attempt and
    bound in its environment, and restartPolicy Never, which podFailurePolicy requires (JobSet's webhook would
    default it to OnFailure)."""
    node = TrainerContainer(NODE, trainjob_launcher_command(spec), [metrics_port()], gang_restart_env(spec))
    return worker_pod(spec, node, "Never")


def final_exit_rule() -> dict[str, Any]:
    """FailJob for the exits nothing may retry: the node container's FINAL_EXITS. The rule names its container: a
    code means what the launcher says only in the container that runs it (an init container's `sh` may exit 2 for
    its own reasons)."""
    exits = {"containerName": NODE, "operator": "In", "values": sorted(FINAL_EXITS)}
    return {"action": "FailJob", "onExitCodes": exits}


def disruption_rule() -> dict[str, Any]:
    """FailJob on the pod condition DisruptionTarget: the Job's message then names the condition, which the JobSet's
    rule turns into a restart that maxRestarts does not count. (Ignore would have the Job replace the one pod, which
    cannot rejoin a static rendezvous; its peers' exits would then fail the Job, counted.)"""
    return {"action": "FailJob", "onPodConditions": [{"type": DISRUPTION_TARGET, "status": "True"}]}


def pod_failure_policy() -> dict[str, Any]:
    """The final exits first (a final exit is never turned into a restart), then disruptions."""
    return {"rules": [final_exit_rule(), disruption_rule()]}


def node_job_template(spec: JobSpec) -> dict[str, Any]:
    """The batch Job of the trainer step: a failed pod fails it at once (backoffLimit 0), with reason PodFailurePolicy
    where a podFailurePolicy rule names the failure (a final exit, a disruption), else BackoffLimitExceeded."""
    template = node_pod_template(spec)
    return {
        "metadata": {"labels": {ANCESTOR_LABEL: TRAINER_ANCESTOR}},
        "spec": {"backoffLimit": 0, "podFailurePolicy": pod_failure_policy(), "template": template},
    }


def failure_message_pattern(rules: list[dict[str, Any]], wanted: str) -> list[str]:
    """Patterns for the message of a Job failed by the podFailurePolicy rules of kind `wanted` (onExitCodes or
    onPodConditions): each ends with its rule's index, as the Job controller writes it ("... matching FailJob rule at
    index N", kubernetes pkg/controller/job/pod_failure_policy.go), so that the two kinds never match each other's."""
    if wanted == "onExitCodes":
        return [
            f"^Container {rule['onExitCodes']['containerName']} for pod [^ ]+ failed with exit code [0-9]+ matching "
            f"FailJob rule at index {index}$"
            for index, rule in enumerate(rules)
            if "onExitCodes" in rule
        ]
    return [
        f"^Pod [^ ]+ has condition {DISRUPTION_TARGET} matching FailJob rule at index {index}$"
        for index, rule in enumerate(rules)
        if "onPodConditions" in rule
    ]


def failure_policy(spec: JobSpec) -> dict[str, Any]:
    """The JobSet's: up to job.maxRestarts whole-gang restarts (the default action); none after a final exit; and
    restarts after a disruption that do not count. A Job failure neither rule matches (a message the Job
    controller wrote differently, too) gets the default: a counted restart, never an end of the run."""
    rules = node_job_template(spec)["spec"]["podFailurePolicy"]["rules"]
    reasons = [POD_FAILURE_POLICY_REASON]
    final = {
        "name": FAIL_RULE,
        "action": "FailJobSet",
        "onJobFailureReasons": reasons,
        "onJobFailureMessagePatterns": failure_message_pattern(rules, "onExitCodes"),
    }
    disruption = {
        "name": DISRUPTION_RULE,
        "action": "RestartJobSetAndIgnoreMaxRestarts",
        "onJobFailureReasons": reasons,
        "onJobFailureMessagePatterns": failure_message_pattern(rules, "onPodConditions"),
    }
    return {"maxRestarts": spec.max_restarts, "rules": [final, disruption]}


def runtime_name(spec: JobSpec) -> str:
    """The runtime belongs to one job (its init containers run the job's image and flags): named after it."""
    return spec.name


def training_runtime(spec: JobSpec) -> dict[str, Any]:
    """The ClusterTrainingRuntime: torch on `nodes` nodes, one replicated job "node" running the worker pod."""
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": RUNTIME_KIND,
        "metadata": {"name": runtime_name(spec), "labels": {**labels(spec), FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": spec.nodes, "torch": {}},
            "template": {
                "metadata": {"labels": labels(spec)},
                "spec": {
                    "failurePolicy": failure_policy(spec),
                    "replicatedJobs": [{"name": NODE, "replicas": 1, "template": node_job_template(spec)}],
                },
            },
        },
    }


def trainjob_manifest(spec: JobSpec) -> dict[str, Any]:
    """The TrainJob: the runtime, with the image, command, node count and processes per node of this run. Trainer v2
    copies neither the TrainJob's labels nor its annotations to the pods (the runtime's pod template labels them)."""
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": TRAINJOB_KIND,
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": labels(spec),
            # The digest of the whole spec, runtime included: a change to the runtime alone changes the TrainJob too,
            # so that the stack replaces it (a running TrainJob keeps the runtime it started with, a snapshot).
            "annotations": {RUN_ID_ANNOTATION: spec.rendezvous_id},
        },
        "spec": {
            "runtimeRef": {"name": runtime_name(spec), "apiGroup": TRAINER_API_GROUP, "kind": RUNTIME_KIND},
            "trainer": {
                "image": spec.image,
                "command": trainjob_launcher_command(spec),
                "numNodes": spec.nodes,
                "numProcPerNode": spec.node.gpus,
            },
        },
    }


def with_trainjob_image(objects: tuple[dict[str, Any], dict[str, Any]], image: Any) -> tuple[dict, dict]:
    """Copies of (runtime, TrainJob) with every container running `image`: the pushed image, a pulumi Output."""
    runtime, trainjob = copy.deepcopy(objects[0]), copy.deepcopy(objects[1])
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        with_pod_image(replicated["template"]["spec"]["template"]["spec"], image)
    trainjob["spec"]["trainer"]["image"] = image
    return runtime, trainjob


def trainjob_objects(spec: JobSpec) -> list[dict[str, Any]]:
    """Every object of a TrainJob run, for the render CLI: the namespace, the pods' service account and its access to
    the nodes, the runtime, then the TrainJob (Trainer v2's webhook rejects a TrainJob whose runtime does not exist
    yet)."""
    runtime, trainjob = training_runtime(spec), trainjob_manifest(spec)
    return [namespace_manifest(spec), service_account_manifest(spec), *node_access_objects(spec), runtime, trainjob]
