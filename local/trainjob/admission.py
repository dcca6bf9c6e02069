"""The admission of a TrainJob run's objects, in the order the cluster meets them; pure and torch-free.

1. The ClusterTrainingRuntime: its CRD's rules and Trainer v2.3.0's webhook (local/trainjob/trainer_webhooks.py).
2. The TrainJob, once its runtime exists: its CRD's rules and Trainer's webhook.
3. The JobSet that Trainer's controller then builds: JobSet v0.12.0's defaults and webhook (jobset_webhook.py).
4. Each child Job the JobSet controller creates (<jobset>-<replicated job>-<index>): the Job API's validation
   (local/trainjob/pod_failure_policy.py).
Steps 1 and 2 fail `pulumi up`; steps 3 and 4 fail later and quietly, in a controller's retries and events, with
the TrainJob accepted and nothing running. Every step runs here before the local run starts anything, and objects
that pass them all must hold no field the models do not read (local/modelled_fields.py: UnmodelledFieldError).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from local.modelled_fields import require_modelled
from local.trainjob.jobset_webhook import JobSetAdmissionError, admit_jobset, trainer_jobset
from local.trainjob.pod_failure_policy import job_spec_problems
from local.trainjob.trainer_webhooks import (
    RUNTIME_FIELDS,
    TRAINER_MODEL,
    TRAINJOB_FIELDS,
    runtime_problems,
    trainjob_problems,
)


class AdmissionError(Exception):
    """An object the cluster would not take, with the step that refused it and every problem it named."""

    def __init__(self, step: str, name: str, problems: list[str]) -> None:
        super().__init__(f"{step} refuses {name}: " + "; ".join(problems))
        self.step, self.name, self.problems = step, name, problems


def child_jobs(jobset: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The Jobs the JobSet controller creates, by name (jobset pkg/util/placement GenJobName) with their spec."""
    name = jobset["metadata"]["name"]
    return [
        (f"{name}-{replicated['name']}-{index}", replicated["template"]["spec"])
        for replicated in jobset["spec"].get("replicatedJobs", [])
        for index in range(replicated.get("replicas", 1))
    ]


def admit(
    runtime: Mapping[str, Any], trainjob: Mapping[str, Any], features_on: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Every step of the run's admission; returns the JobSet as stored, or raises AdmissionError at the first
    step that refuses, as the cluster would stop there."""
    problems = runtime_problems(runtime)
    if problems:
        raise AdmissionError("Trainer v2's ClusterTrainingRuntime admission", runtime["metadata"]["name"], problems)
    problems = trainjob_problems(trainjob, {runtime["metadata"]["name"]: runtime})
    if problems:
        raise AdmissionError("Trainer v2's TrainJob admission", trainjob["metadata"]["name"], problems)
    jobset = trainer_jobset(runtime, trainjob)
    try:
        stored = admit_jobset(jobset, features_on)
    except JobSetAdmissionError as refused:
        raise AdmissionError("JobSet v0.12.0's webhook", jobset["metadata"]["name"], refused.problems) from None
    for job_name, job_spec in child_jobs(stored):
        problems = job_spec_problems(job_name, job_spec)
        if problems:
            raise AdmissionError("the Job API (batch/v1)", job_name, problems)
    # Admitted: the local run acts on these objects only as far as its models read them (local/modelled_fields.py).
    require_modelled(runtime, RUNTIME_FIELDS, "ClusterTrainingRuntime", TRAINER_MODEL)
    require_modelled(trainjob, TRAINJOB_FIELDS, "TrainJob", TRAINER_MODEL)
    return stored
