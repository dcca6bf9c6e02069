"""The trainer's own TrainConfig (trainer/config.py) that the stack's job.* settings choose: the one object the job's
trainer runs with (workloads/job/pod_trainer_config.py adds the pod's layout to it and renders it with `to_argv`), that
the sizing sizes (stack/fit.py) and that the policy pack reads back from the job's flags with the trainer's parser.

Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import replace

from stack.config import ArtifactsConfig, JobConfig
from trainer.config import ArtifactsConfig as TrainerArtifacts
from trainer.config import (
    CheckpointConfig,
    DataConfig,
    LoraConfig,
    ModelConfig,
    OptimConfig,
    ParallelConfig,
    ScheduleConfig,
    TrainConfig,
    ValidationConfig,
)
from trainer.s3.uri import is_s3_uri


def stack_trainer_config(
    job: JobConfig,
    checkpoint_timeout_minutes: int | None = None,
    artifacts: ArtifactsConfig | None = None,
    artifacts_uri: str | None = None,
) -> TrainConfig:
    """The trainer options the stack's job.* settings choose; everything else keeps the trainer's default.
    `checkpoint_timeout_minutes` is sized from the stack's file system (stack/fit.py); None keeps the default.
    `artifacts_uri`: the run's --artifacts-uri (stack/artifacts.py artifacts_flag), with `artifacts` the stack's
    artifacts.* settings; None writes nothing to S3. job.resumeFrom is --resume-from either way.

    --replicate-groups stays at the trainer's default (one group per node, from WORLD_SIZE / LOCAL_WORLD_SIZE), so
    HYBRID_SHARD stays right when an elastic job re-forms with fewer nodes."""
    checkpoint = CheckpointConfig(every=job.checkpoint_every)
    if checkpoint_timeout_minutes is not None:
        checkpoint = replace(checkpoint, timeout_minutes=float(checkpoint_timeout_minutes))
    return TrainConfig(
        model=ModelConfig(name=job.model),
        data=DataConfig(dataset=job.dataset, dataset_format=job.dataset_format, seq_len=job.seq_len),
        parallel=ParallelConfig(
            sharding_strategy=job.sharding_strategy,
            mixed_precision=job.mixed_precision,
            activation_checkpointing=job.activation_checkpointing,
            compile=job.compile,
            all_reduce_dtype=job.all_reduce_dtype,
        ),
        optim=OptimConfig(lr=job.learning_rate),
        schedule=ScheduleConfig(batch_size=job.batch_size, global_batch_size=job.global_batch_size, steps=job.steps),
        checkpoint=checkpoint,
        lora=LoraConfig(rank=job.lora.rank, alpha=job.lora.alpha, targets=",".join(job.lora.targets)),
        validation=ValidationConfig(
            split=job.validation.split,
            dataset=job.validation.dataset,
            dataset_split=job.validation.dataset_split,
            every=job.validation.every,
            keep_best=job.validation.keep_best,
            early_stop_patience=job.validation.early_stop_patience,
        ),
        artifacts=TrainerArtifacts(
            uri=artifacts_uri,
            # 0: every checkpoint also goes to S3 (the trainer's default, and artifacts.checkpointEvery's)
            checkpoint_every=(artifacts.checkpoint_every or 0) if artifacts_uri and artifacts else 0,
            resume_from=job.resume_from,
        ),
    )


def job_s3_inputs(job: JobConfig) -> tuple[str, ...]:
    """The s3:// URIs the job's trainer reads, each once: the data set, the held-out data set (job.validation.dataset),
    the model and the checkpoint it resumes from. The pods' role may read each (infra/trainer_access.py), read-only."""
    values = (job.dataset, job.validation.dataset, job.model, job.resume_from)
    return tuple(dict.fromkeys(v for v in values if v is not None and is_s3_uri(v)))
