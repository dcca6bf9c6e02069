"""Kubeflow Trainer v2.3.0's admission of a ClusterTrainingRuntime and a TrainJob that uses it. It holds the validating
webhooks and the CRDs' own rules, as far as they apply to a torch runtime with one trainer step.

Pure and torch-free, from kubeflow/trainer v2.3.0:
- pkg/webhooks/clustertrainingruntime_webhook.go -> trainingruntime_webhook.go validateReplicatedJobs: a replicated
  job labelled trainer.kubeflow.org/trainjob-ancestor-step with a known step has replicas 1 and the container that
  step needs ("node" for the trainer).
- pkg/webhooks/trainjob_webhook.go ValidateCreate -> pkg/runtime/core/clustertrainingruntime.go ValidateObjects:
  the runtime must exist; then the plugins' Validate: the torch plugin (plugins/torch/torch.go) refuses a
  TrainJob whose trainer env sets a variable it reserves (constants.go TorchRunReservedEnvNames) and an
  envInjection target that is not in the runtime; the jobset plugin (plugins/jobset/jobset.go) checks runtime
  patches against the runtime's jobs and containers.
- The CRDs' validation (pkg/apis/trainer/v1alpha1/trainjob_types.go, trainingruntime_types.go): the TrainJob's name
  an RFC 1035 label of at most 63 characters, the trainer's image at most 500 characters, command and args at most
  128 items each, env at most 128; at most one ML policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from local.modelled_fields import WHOLE, Fields
from local.trainjob.jobset_webhook import JOBSET_SPEC_FIELDS
from stack.job_api import RUNTIME_KIND, TRAINER_ANCESTOR, TRAINER_API_GROUP
from stack.names import DNS_1035_LABEL, DNS_LABEL_MAX_LENGTH
from workloads.job.trainjob import NODE, TRAINER_V2_ENV

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
# trainingruntime_webhook.go expectedContainerNames: the container each ancestor step must have.
STEP_CONTAINERS = {
    TRAINER_ANCESTOR: NODE,
    "model-initializer": "model-initializer",
    "dataset-initializer": "dataset-initializer",
}
TORCH_RESERVED_ENV = frozenset(TRAINER_V2_ENV)
ML_POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
MAX_IMAGE, MAX_ITEMS = 500, 128
FAILURE_RULE_REQUIRED = ("action", "name")  # the CRD's `required` on the JobSet template's failure policy rules


# The fields the Trainer v2 models read (local/modelled_fields.py): a torch policy with the node count alone (no
# envInjection, which the local run would not inject, nor the runtime's numProcPerNode); the TrainJob's runtime,
# image, command, env and numbers (no args, runtime patches, initializer, suspend or managedBy: the local run applies
# none of them).
RUNTIME_FIELDS: Fields = {
    "apiVersion": WHOLE,
    "kind": WHOLE,
    "metadata": WHOLE,
    "spec": {"mlPolicy": {"numNodes": WHOLE, "torch": {}}, "template": {"metadata": WHOLE, "spec": JOBSET_SPEC_FIELDS}},
}
TRAINJOB_FIELDS: Fields = {
    "apiVersion": WHOLE,
    "kind": WHOLE,
    "metadata": WHOLE,
    "spec": {
        "runtimeRef": {"name": WHOLE, "apiGroup": WHOLE, "kind": WHOLE},
        "trainer": {"image": WHOLE, "command": WHOLE, "env": WHOLE, "numNodes": WHOLE, "numProcPerNode": WHOLE},
    },
}
TRAINER_MODEL = "the Trainer v2.3.0 model (local/trainjob/trainer_webhooks.py, local/trainjob/launch.py)"


def replicated_jobs_problems(runtime: Mapping[str, Any]) -> list[str]:
    """validateReplicatedJobs over the runtime's JobSet template."""
    problems = []
    path = "spec.template.spec.replicatedJobs"
    for index, replicated in enumerate(runtime["spec"]["template"]["spec"].get("replicatedJobs", [])):
        step = (replicated["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL)
        if step not in STEP_CONTAINERS:
            continue
        if replicated.get("replicas", 1) != 1:
            problems.append(f"{path}[{index}].replicas: Invalid value: {replicated.get('replicas')}: always must be 1")
        names = [c["name"] for c in replicated["template"]["spec"]["template"]["spec"].get("containers", [])]
        if STEP_CONTAINERS[step] not in names:
            problems.append(
                f"{path}[{index}].template.spec.template.spec.containers: must contain the required "
                f"container for the ancestor: {step}"
            )
    return problems


def runtime_crd_problems(runtime: Mapping[str, Any]) -> list[str]:
    """The CRD's own rules: at most one of the ML policies (trainingruntime_types.go MLPolicy, a CEL rule), and each
    rule of the JobSet template's failure policy with its `action` and `name` (the embedded JobSet type's required
    fields: manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml, `required: [action, name]`). The
    API server refuses a rule without a name here, before JobSet's webhook, which would name it, ever sees it."""
    ml_policy = runtime["spec"].get("mlPolicy") or {}
    problems = []
    if sum(1 for name in ML_POLICIES if name in ml_policy) > 1:
        problems.append("spec.mlPolicy: Only one of the policy can be configured")
    policy = runtime["spec"]["template"]["spec"].get("failurePolicy") or {}
    for index, rule in enumerate(policy.get("rules") or []):
        for field in FAILURE_RULE_REQUIRED:
            if field not in rule:
                problems.append(f"spec.template.spec.failurePolicy.rules[{index}].{field}: Required value")
    return problems


def runtime_problems(runtime: Mapping[str, Any]) -> list[str]:
    """Everything the API server and Trainer's webhook refuse in a ClusterTrainingRuntime."""
    return [*runtime_crd_problems(runtime), *replicated_jobs_problems(runtime)]


def _runtime_containers(runtime: Mapping[str, Any]) -> dict[str, set[str]]:
    """The init containers and containers of each replicated job of the runtime, by job name."""
    containers = {}
    for replicated in runtime["spec"]["template"]["spec"].get("replicatedJobs", []):
        pod = replicated["template"]["spec"]["template"]["spec"]
        containers[replicated["name"]] = {
            c["name"] for c in [*pod.get("initContainers", []), *pod.get("containers", [])]
        }
    return containers


def trainjob_crd_problems(trainjob: Mapping[str, Any]) -> list[str]:
    """trainjob_types.go: the name, and the sizes of the trainer's fields."""
    name = trainjob["metadata"]["name"]
    trainer = trainjob["spec"].get("trainer") or {}
    problems = []
    if not DNS_1035_LABEL.fullmatch(name):  # RFC 1035: apimachinery's DNS-1035 label (stack/names.py)
        problems.append("metadata.name must match RFC 1035 DNS label format")
    if len(name) > DNS_LABEL_MAX_LENGTH:
        problems.append(f"metadata.name must be no more than {DNS_LABEL_MAX_LENGTH} characters")
    if len(trainer.get("image") or "") > MAX_IMAGE:
        problems.append(f"spec.trainer.image: may not be longer than {MAX_IMAGE}")
    for key in ("command", "args", "env"):
        if len(trainer.get(key) or []) > MAX_ITEMS:
            problems.append(f"spec.trainer.{key}: must have at most {MAX_ITEMS} items")
    return problems


def torch_plugin_problems(runtime: Mapping[str, Any], trainjob: Mapping[str, Any]) -> list[str]:
    """plugins/torch/torch.go Validate, for a runtime with a torch policy."""
    torch = (runtime["spec"].get("mlPolicy") or {}).get("torch")
    if torch is None:
        return []
    problems = []
    containers = _runtime_containers(runtime)
    for target in (torch.get("envInjection") or {}).get("targets", []):
        for container in target.get("containerNames", []):
            if container not in containers.get(target.get("jobName", ""), set()):
                problems.append(
                    f"spec.runtimeRef: envInjection target podSet {target.get('jobName')!r} container "
                    f"{container!r} not found in runtime template"
                )
    env = (trainjob["spec"].get("trainer") or {}).get("env") or []
    reserved = sorted({entry["name"] for entry in env} & TORCH_RESERVED_ENV)
    if reserved:
        problems.append(f"spec.trainer.env: must not have reserved envs, invalid envs configured: {reserved}")
    return problems


def runtime_patch_problems(runtime: Mapping[str, Any], trainjob: Mapping[str, Any]) -> list[str]:
    """plugins/jobset/jobset.go Validate: runtime patches name only jobs and containers the runtime has, and set
    no env on the node or initializer containers."""
    containers = _runtime_containers(runtime)
    problems = []
    for patch in trainjob["spec"].get("runtimePatches") or []:
        template = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for job_patch in template.get("replicatedJobs", []):
            if job_patch["name"] not in containers:
                problems.append(
                    "spec.runtimePatches: must not have replicated job that doesn't exist in the runtime job template"
                )
                continue
            pod = ((job_patch.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
                if container["name"] not in containers[job_patch["name"]]:
                    problems.append(
                        f"spec.runtimePatches: must not have container that doesn't exist in the runtime "
                        f"job {job_patch['name']}"
                    )
            for container in pod.get("containers", []):
                if container.get("env") and container["name"] in STEP_CONTAINERS.values():
                    problems.append(
                        "spec.runtimePatches: must not have envs for the dataset-initializer, "
                        "model-initializer, node containers"
                    )
    return problems


def trainjob_problems(trainjob: Mapping[str, Any], runtimes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Everything the API server and Trainer's webhook refuse in a TrainJob, given the ClusterTrainingRuntimes that
    exist, by name (a namespaced TrainingRuntime is never among them here)."""
    problems = trainjob_crd_problems(trainjob)
    reference = trainjob["spec"]["runtimeRef"]
    # trainjob_webhook.go: the runtime registry's key, kind.group, with the CRD's defaults for either.
    key = f"{reference.get('kind', RUNTIME_KIND)}.{reference.get('apiGroup', TRAINER_API_GROUP)}"
    if key not in (f"{RUNTIME_KIND}.{TRAINER_API_GROUP}", f"TrainingRuntime.{TRAINER_API_GROUP}"):
        return [*problems, f"unsupported runtime: {key}"]
    runtime = runtimes.get(reference["name"]) if key.startswith(f"{RUNTIME_KIND}.") else None
    if runtime is None:
        return [
            *problems,
            f'spec.RuntimeRef: clustertrainingruntimes.trainer.kubeflow.org "{reference["name"]}" not '
            "found: specified clusterTrainingRuntime must be created before the TrainJob is created",
        ]
    return [*problems, *torch_plugin_problems(runtime, trainjob), *runtime_patch_problems(runtime, trainjob)]
