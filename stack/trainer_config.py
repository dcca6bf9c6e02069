"""The trainer's own TrainConfig that the stack's job.* settings choose: the one object the job runs with, the sizing
sizes and the policy pack reads back. The class is trainer/base/flags/config.py's. workloads/job/pod_trainer_config.py
adds the pod's layout to it and renders it with `to_argv`, stack/fit.py sizes it, and the policy pack reads it back from
the job's flags with the trainer's parser.

Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import replace

from stack.config import ArtifactsConfig, JobConfig
from stack.fields import stack_problem, trainer_values
from trainer.base.flags.config import TrainConfig
from trainer.base.flags.options import Facts, rule_problems, with_values
from trainer.base.s3.uri import is_s3_uri


def stack_trainer_config(
    job: JobConfig,
    checkpoint_timeout_minutes: int | None = None,
    artifacts: ArtifactsConfig | None = None,
    artifacts_uri: str | None = None,
) -> TrainConfig:
    """The trainer options the stack's job.* settings choose (each declared by its trainer option, stack/fields.py
    job_option); everything else keeps the trainer's default.
    `checkpoint_timeout_minutes` is sized from the stack's file system (stack/fit.py); None keeps the default.
    `artifacts_uri`: the run's --artifacts-uri (stack/artifacts.py artifacts_flag), with `artifacts` the stack's
    artifacts.* settings; None writes nothing to S3. job.resumeFrom is --resume-from either way.

    --replicate-groups stays at the trainer's default (one group per node, from WORLD_SIZE / LOCAL_WORLD_SIZE), so
    HYBRID_SHARD stays right when an elastic job re-forms with fewer nodes."""
    config: TrainConfig = with_values(TrainConfig(), trainer_values(job))
    if checkpoint_timeout_minutes is not None:
        config = replace(
            config, checkpoint=replace(config.checkpoint, timeout_minutes=float(checkpoint_timeout_minutes))
        )
    # 0: every checkpoint also goes to S3 (the trainer's default, and artifacts.checkpointEvery's)
    s3_every = (artifacts.checkpoint_every or 0) if artifacts_uri and artifacts else 0
    return replace(config, artifacts=replace(config.artifacts, uri=artifacts_uri, checkpoint_every=s3_every))


def trainer_rule_problems(job: JobConfig, facts: Facts | None = None) -> list[str]:
    """The trainer's rules across its options (trainer/base/flags/config.py: OnlyWith, Requires, Excludes, Across, and
    with `facts` the model's shape and the world size) on the options the pods get, in the trainer's words with each
    option named by its job.* key: the trainer would refuse these at start."""
    return [stack_problem(problem) for problem in rule_problems(stack_trainer_config(job), facts)]


def job_s3_inputs(job: JobConfig) -> tuple[str, ...]:
    """The s3:// URIs the job's trainer reads, each once: the data set, the held-out data set (job.validation.dataset),
    the model and the checkpoint it resumes from. The pods' role may read each (infra/trainer_access.py), read-only."""
    values = (job.dataset, job.validation.dataset, job.model, job.resume_from)
    return tuple(dict.fromkeys(v for v in values if v is not None and is_s3_uri(v)))
