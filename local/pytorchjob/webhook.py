"""The Training Operator's validating webhook for PyTorchJobs, as a pure function of the object.

A model of kubeflow/trainer v1.9.4 (the Training Operator the platform installs, stack/versions.py):
pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob, with pkg/common/util/webhooks.go ValidateRunPolicy.
The API server calls it on every create and update (failurePolicy=fail), so an object it refuses is never stored:
`pulumi up` fails on it, and the local run refuses it the same way before starting any agent. The tests run it over
every stack's rendered PyTorchJob. Torch-free; it reads plain dicts as `pytorchjob_manifest` returns them.

    admission = validate_pytorchjob(pytorchjob_manifest(job_spec(config)))
    if not admission.allowed: ...  # admission.errors, as the API server would list them
    admit_pytorchjob(manifest)  # or raise AdmissionDeniedError with the API server's message

Each error reads "<field path>: <what>", the webhook's field.ErrorList in its own words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from local.modelled_fields import WHOLE, EachValue, Fields, Only, require_modelled
from stack.names import DNS_1035_LABEL, DNS_LABEL_MAX_LENGTH

# pkg/apis/kubeflow.org/v1/pytorch_types.go: the replica types and the container the operator configures.
MASTER = "Master"
WORKER = "Worker"
REPLICA_TYPES = (MASTER, WORKER)
DEFAULT_CONTAINER_NAME = "pytorch"  # PyTorchJobDefaultContainerName
# pkg/apis/kubeflow.org/v1/common_types.go KubeflowJobsController and MultiKueueController: the managers
# runPolicy.managedBy may name (pkg/common/util/webhooks.go supportedJobControllers).
MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")

REPLICA_SPECS = "spec.pytorchReplicaSpecs"
# The fields the Training Operator's models read (local/modelled_fields.py): this webhook, the operator's PET_*
# variables (launch.py), its restart rule (restart_policy.py) and cleanPodPolicy Running alone (the local
# run stops a failed job's running pods). No elasticPolicy.nProcPerNode (deprecated; the PET_* model reads
# spec.nprocPerNode), metrics, schedulingPolicy, TTL, deadline or suspend; the one manager that reconciles it.
PYTORCHJOB_FIELDS: Fields = {
    "apiVersion": WHOLE,
    "kind": WHOLE,
    "metadata": WHOLE,
    "spec": {
        "nprocPerNode": WHOLE,
        "elasticPolicy": {
            "minReplicas": WHOLE,
            "maxReplicas": WHOLE,
            "maxRestarts": WHOLE,
            "rdzvBackend": WHOLE,
            "rdzvHost": WHOLE,
            "rdzvPort": WHOLE,
            "rdzvId": WHOLE,
            "rdzvConf": WHOLE,
        },
        "runPolicy": {
            "cleanPodPolicy": Only(("Running",)),
            "backoffLimit": WHOLE,
            "managedBy": Only((MANAGED_BY[0],)),
        },
        "pytorchReplicaSpecs": EachValue({"replicas": WHOLE, "restartPolicy": WHOLE, "template": WHOLE}),
    },
}
PYTORCHJOB_MODEL = "the Training Operator v1.9.4 model (local/pytorchjob/webhook.py, local/launch.py)"


@dataclass(frozen=True)
class Admission:
    """What the webhook answers: warnings (shown, not refusing) and errors (any one refuses the object)."""

    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.errors

    def denial(self) -> str:
        """The refusal as `kubectl apply` shows it; empty when the object is allowed."""
        if self.allowed:
            return ""
        return 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: ' + (
            "; ".join(self.errors)
        )


class AdmissionDeniedError(ValueError):
    """The webhook refuses the object: the message lists every error, as the API server's answer does."""


def validate_pytorchjob(job: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Admission:
    """validatePyTorchJob on a create (`old` None) or an update of `old` to `job`."""
    errors = name_errors(job)
    spec = job.get("spec") or {}
    if old is not None:
        # ValidateUpdate in v1.9.4 reads both jobs from the new object (`oldJob := newObj.(...)`), so the
        # immutability of runPolicy.managedBy it means to check compares the new value with itself and never fails.
        errors += managed_by_update_errors(spec, spec)
    errors += run_policy_errors(spec.get("runPolicy") or {})
    warnings, spec_errors = spec_admission(spec)
    return Admission(tuple(warnings), tuple(errors + spec_errors))


def pytorchjob_problems(job: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """The errors alone, in the form of local/trainjob/trainer_webhooks.py's trainjob_problems: empty when admitted."""
    return list(validate_pytorchjob(job, old).errors)


def admit_pytorchjob(job: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Admission:
    """validate_pytorchjob, raising AdmissionDeniedError where the API server would refuse the object, and
    UnmodelledFieldError where it would admit one holding a field the local run's models do not read."""
    admission = validate_pytorchjob(job, old)
    if not admission.allowed:
        raise AdmissionDeniedError(admission.denial())
    require_modelled(job, PYTORCHJOB_FIELDS, "PyTorchJob", PYTORCHJOB_MODEL)
    return admission


def name_errors(job: Mapping[str, Any]) -> list[str]:
    """metadata.name must be a DNS-1035 label: the operator derives pod, Service and label values from it."""
    name = (job.get("metadata") or {}).get("name") or ""
    problems = []
    # apimachinery IsDNS1035Label (stack/names.py), which NameIsDNS1035Label(name, false) applies
    if len(name) > DNS_LABEL_MAX_LENGTH:
        problems.append(f"must be no more than {DNS_LABEL_MAX_LENGTH} characters")
    if not DNS_1035_LABEL.match(name):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character"
        )
    return [f"metadata.name: Invalid value: {name!r}: should match: {','.join(problems)}"] if problems else []


def run_policy_errors(run_policy: Mapping[str, Any]) -> list[str]:
    """ValidateRunPolicy: a managedBy, when set, names a controller the operator knows."""
    manager = run_policy.get("managedBy")
    if manager is None or manager in MANAGED_BY:
        return []
    return [f"spec.runPolicy.managedBy: Unsupported value: {manager!r}: supported values: {', '.join(MANAGED_BY)}"]


def managed_by_update_errors(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> list[str]:
    """ValidateRunPolicyUpdate: runPolicy.managedBy is immutable."""
    old = (old_spec.get("runPolicy") or {}).get("managedBy")
    new = (new_spec.get("runPolicy") or {}).get("managedBy")
    return [] if old == new else ["spec.runPolicy.managedBy: Invalid value: field is immutable"]


def spec_admission(spec: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """validateSpec: the elastic policy's needs, then every replica spec."""
    warnings: list[str] = []
    errors: list[str] = []
    elastic = spec.get("elasticPolicy")
    replica_specs = spec.get("pytorchReplicaSpecs")
    if elastic is not None:
        if WORKER not in (replica_specs or {}):
            errors.append(f"{REPLICA_SPECS}[{WORKER}]: Required value: must be configured if elastic policy is used")
        if elastic.get("nProcPerNode") is not None:
            warnings.append("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
            if spec.get("nprocPerNode") is not None:
                errors.append("spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode")
    return warnings, errors + replica_spec_errors(replica_specs)


def replica_spec_errors(replica_specs: Mapping[str, Any] | None) -> list[str]:
    """validatePyTorchReplicaSpecs: Master and Worker only, each with containers, every container an image, one
    container named "pytorch" (the only one the operator gives its PET_* variables and reads exit codes from), one
    Master and at least one Worker."""
    if replica_specs is None:  # a JSON {} decodes to an empty, non-nil map in Go: allowed
        return [f"{REPLICA_SPECS}: Required value: must be required"]
    errors: list[str] = []
    for replica_type, replica in replica_specs.items():
        path = f"{REPLICA_SPECS}[{replica_type}]"
        containers_path = f"{path}.template.spec.containers"
        if replica_type not in REPLICA_TYPES:
            supported = ", ".join(f'"{t}"' for t in REPLICA_TYPES)
            errors.append(f'{path}: Unsupported value: "{replica_type}": supported values: {supported}')
        containers = ((((replica or {}).get("template") or {}).get("spec")) or {}).get("containers") or []
        if not containers:
            errors.append(f"{containers_path}: Required value: must be specified")
        for index, container in enumerate(containers):
            if not container.get("image"):
                errors.append(f"{containers_path}[{index}].image: Required value: must be required")
        if not any(container.get("name") == DEFAULT_CONTAINER_NAME for container in containers):
            errors.append(
                f"{containers_path}: Required value: must have at least one container with name "
                f"{DEFAULT_CONTAINER_NAME}"
            )
        replicas = (replica or {}).get("replicas")
        if replica_type == MASTER and replicas != 1:
            errors.append(f"{path}.replicas: Forbidden: must be 1")
        elif replica_type != MASTER and replicas is not None and replicas < 1:
            errors.append(f"{path}.replicas: Forbidden: must be at least 1")
    return errors
