"""The training run: set up the components, resume, loop over the steps, save, export.

One code path for every device and world size: NCCL on CUDA, gloo on CPU; a single plain process is a world of
one with the same device mesh and FSDP wrapping.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from trainer.base.errors import InputError
from trainer.base.faults import maybe_fault
from trainer.base.flags.config import TrainConfig, ValidationConfig
from trainer.base.flags.parallel_plan import RunPlan, make_plan
from trainer.base.model.source import ModelSource
from trainer.base.pod.env import DistEnv
from trainer.base.pod.shutdown import SigtermHandler
from trainer.base.s3.model_upload import upload_model
from trainer.base.s3.transfer import S3Error
from trainer.checkpoint.checkpointer import Checkpointer, Progress, TrainState
from trainer.checkpoint.export import export_hf, generation_config
from trainer.checkpoint.layout import checkpoint_name, model_fingerprint
from trainer.checkpoint.load import Replicas
from trainer.comms.distributed import init_distributed, io_group, leave_distributed, pick_device
from trainer.data.cache import cached_splits
from trainer.data.packing import (
    PackedData,
    Sample,
    SampleOrder,
    StepBatch,
    build_splits,
    epochs,
    epochs_warning,
    step_batch,
)
from trainer.data.split import Splits
from trainer.data.tokenizer import Tokenizer, load_tokenizer
from trainer.dtypes import TORCH_DTYPES
from trainer.evaluation import (
    VALIDATION_META,
    BestSoFar,
    Evaluation,
    Validator,
    eval_due,
    held_out_identity,
    perplexity,
    summed_token_loss,
)
from trainer.loss_scale import LossScaler
from trainer.model.build import (
    build_meta_model,
    hf_config,
    init_adapters,
    init_buffers,
    init_weights,
    load_pretrained_weights,
)
from trainer.model.lora import apply_lora
from trainer.model.loss import use_chunked_loss
from trainer.optim import build_optimizer, build_scheduler
from trainer.parallel.parallelize import build_mesh, parallelize, precompute_fp8_scales
from trainer.record.archive import keep_record, restore_metrics
from trainer.record.reporting import StepReporter, StepResult, validation_figures

log = logging.getLogger(__name__)
PRETRAINED_FILES = ["*.json", "*.safetensors"]  # config, generation config, index and weights


class DeviceBatch(NamedTuple):
    """One micro batch on the training device (trainer/data/packed.py Sample's arrays)."""

    inputs: torch.Tensor
    labels: torch.Tensor
    positions: torch.Tensor


def pretrained_directory(source: ModelSource, env: DistEnv, io: dist.ProcessGroup) -> Path:
    """The local directory of the weights. Staged (python -m trainer.stage) with the hub offline, every rank finds
    them in the cache; otherwise each node's first rank downloads them while the node's other ranks wait."""
    if source.directory is not None:
        return source.directory
    from huggingface_hub import constants, snapshot_download

    if not constants.HF_HUB_OFFLINE:
        if env.local_rank == 0:
            snapshot_download(source.name, allow_patterns=PRETRAINED_FILES)
        dist.barrier(group=io)  # a download takes long: the long-timeout group
    return cached_snapshot(source)


def cached_snapshot(source: ModelSource) -> Path:
    """Where the node's cache holds a hub model's files (downloaded or staged): looked up, no request to the hub."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(source.name, allow_patterns=PRETRAINED_FILES, local_files_only=True))


def build_model(
    source: ModelSource,
    config: TrainConfig,
    mesh: DeviceMesh,
    device: torch.device,
    env: DistEnv,
    io: dist.ProcessGroup,
    restored: bool = False,
) -> tuple[nn.Module, Any]:
    """Meta device -> parallelize (shard) -> to_empty -> weights (seeded init, or this rank's pretrained rows; none
    where `restored`: the checkpoint the run resumes from overwrites every weight)."""
    model_config = hf_config(source)
    model = build_meta_model(model_config)
    use_chunked_loss(model)
    if config.lora.rank:
        apply_lora(model, config.lora, TORCH_DTYPES[config.parallel.mixed_precision])
    parallelize(model, config.parallel, mesh, tokens_per_rank=config.schedule.batch_size * config.data.seq_len)
    model.to_empty(device=device)
    init_buffers(model, device)
    if restored:
        log.info("weights: every one from the checkpoint the run resumes from; the pretrained weights are not read")
    elif source.pretrained:
        load_pretrained_weights(model, pretrained_directory(source, env, io))
    else:
        init_weights(model, config.schedule.seed, std=model_config.initializer_range)
    if config.lora.rank:
        init_adapters(model, config.schedule.seed)
        trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
        log.info(
            "LoRA rank %d, alpha %d on %s: %.2fM trained parameters, the base frozen in %s",
            config.lora.rank,
            config.lora.alpha,
            ",".join(config.lora.target_list()),
            trained / 1e6,
            config.parallel.mixed_precision,
        )
    return model, model_config


def to_device(micro_batches: list[Sample], device: torch.device) -> list[DeviceBatch]:
    """Every micro batch of the step, inputs and labels, copied before the first forward. On CUDA from pinned host
    memory without blocking, so the host queues the whole step without waiting for the GPU (a pageable copy waits
    for the GPU's queue to drain, and a copy after the forward would stall it)."""
    pinned = device.type == "cuda"

    def copy(array: np.ndarray) -> torch.Tensor:
        host = torch.from_numpy(array)
        return (host.pin_memory() if pinned else host).to(device, non_blocking=pinned)

    return [DeviceBatch(*(copy(array) for array in batch)) for batch in micro_batches]


def train_step(
    state: TrainState, batch: StepBatch, device: torch.device, grad_clip: float, fp8: bool = False
) -> StepResult:
    """One optimizer step over this rank's micro batches of the global batch.

    Each micro batch's summed token loss is divided by the token count of the whole global batch, so the sum
    over micro batches and ranks is the mean over the global batch for any world size; FSDP sums the gradients over
    the dp ranks (trainer/parallel/parallelize.py: sum_gradients).

    Nothing here waits for the device except an fp16 step, whose skip decision needs the gradient norm on the host:
    the loss and the norm stay device tensors until a log step reads them (trainer/record/reporting.py).
    """
    model, optimizer, scaler = state.model, state.optimizer, state.loss_scaler
    optimizer.zero_grad(set_to_none=True)
    loss_total = torch.zeros((), device=device)
    micro_batches = to_device(batch.micro_batches, device)
    for index, (inputs, targets, positions) in enumerate(micro_batches):
        # Replicated meshes (HYBRID_SHARD, NO_SHARD) all-reduce across replicas once per step: the micro steps
        # before the last only reduce-scatter within their shard group and accumulate (FSDP2's partial reduce
        # output). On 1-D meshes there is no all-reduce and this changes nothing.
        cast(FSDPModule, model).set_requires_all_reduce(index == len(micro_batches) - 1)  # fully_shard made it one
        loss = summed_token_loss(model, inputs, targets, positions) / max(1, batch.global_target_tokens)
        scaler.scaled(loss).backward()
        loss_total += loss.detach()
    parameters = [p for p in model.parameters() if p.requires_grad]  # under LoRA the adapters alone
    scaler.unscale(parameters)
    if grad_clip:
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    else:  # only the norm, for the metrics: no pass over the gradients to scale them by 1
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])
    if isinstance(grad_norm, DTensor):
        grad_norm = grad_norm.full_tensor()
    lr = optimizer.param_groups[0]["lr"]
    take_step(state, grad_norm, fp8)
    return StepResult(loss_total, grad_norm, lr)


def take_step(state: TrainState, grad_norm: torch.Tensor, fp8: bool = False) -> bool:
    """The optimizer's and the schedule's step, unless fp16 gradients overflowed (a non-finite norm, alike on every
    rank: the step is skipped, which needs the norm on the host). Whether the step was taken.

    Only a step taken moves the schedule: a skipped step would otherwise spend one of the warmup or decay steps on
    nothing, and the schedule would reach its end early."""
    scaler = state.loss_scaler
    if scaler.enabled and not scaler.update(float(grad_norm)):
        return False
    state.optimizer.step()
    if fp8:
        precompute_fp8_scales(state.model)
    state.scheduler.step()
    return True


def load_data(config: TrainConfig, source: ModelSource, env: DistEnv | None = None) -> tuple[Tokenizer, Splits]:
    """The tokenizer and the packed training and held-out streams (trainer/data/split.py): mapped from
    --data-cache-dir when given (tokenised there once, by rank 0 or a stage step), else tokenised by this rank."""
    tokenizer = load_tokenizer(config.model.tokenizer or source.default_tokenizer())
    if tokenizer.vocab_size > source.shape.vocab_size:
        raise InputError(
            f"--tokenizer {tokenizer.name}: its {tokenizer.vocab_size} ids do not fit the vocabulary of "
            f"{source.name} ({source.shape.vocab_size})"
        )
    if config.data.cache_dir and env is not None:
        wait_s = config.checkpoint.timeout_minutes * 60
        directory = Path(config.data.cache_dir)
        return tokenizer, cached_splits(config.data, config.validation, tokenizer, directory, env, wait_s)
    return tokenizer, build_splits(config.data, config.validation, tokenizer)


@dataclass
class Session:
    """Everything a run trains with, set up and (if a checkpoint exists) restored."""

    state: TrainState
    model_config: Any
    checkpointer: Checkpointer | None
    source: ModelSource
    """The model the run started from (the export carries its generation config over)."""
    best: BestSoFar = field(default_factory=BestSoFar)
    """The lowest held-out loss and its step, once training is over (none without a held-out set)."""


def replicas(mesh: DeviceMesh, plan: RunPlan, timeout: timedelta) -> Replicas | None:
    """On a replicated mesh, the groups a checkpoint load reads through once and broadcasts over (every rank calls
    this: creating a group is collective)."""
    if plan.replicate == 1:
        return None
    first_ranks = mesh.mesh[0].flatten().tolist()  # the mesh is (replicate, shard): row 0 is the first replica
    first = io_group(timeout, ranks=first_ranks)
    return Replicas(mesh.get_group("dp_replicate"), first if dist.get_rank() in first_ranks else None)


def set_up(config: TrainConfig, env: DistEnv, source: ModelSource, device: torch.device, plan: RunPlan) -> Session:
    torch.manual_seed(config.schedule.seed)
    wait = timedelta(minutes=config.checkpoint.timeout_minutes)
    io = io_group(wait)
    mesh = build_mesh(config.parallel.sharding_strategy, plan, device.type)
    checkpointer = checkpointer_for(config, env, source, device, io, replicas(mesh, plan, wait))
    restored = checkpointer is not None and checkpointer.restores_every_weight()
    model, model_config = build_model(source, config, mesh, device, env, io, restored)
    optimizer = build_optimizer(model, config.optim)
    scheduler = build_scheduler(optimizer, config.optim, config.schedule.steps)
    scaler = LossScaler(enabled=config.parallel.mixed_precision == "fp16")
    state = TrainState(model, optimizer, scheduler, scaler, Progress())
    if checkpointer is not None:
        checkpointer.restore(state)
        checkpointer.check_space(state)
    return Session(state, model_config, checkpointer, source)


def checkpointer_for(
    config: TrainConfig,
    env: DistEnv,
    source: ModelSource,
    device: torch.device,
    io: dist.ProcessGroup,
    replicated: Replicas | None,
) -> Checkpointer | None:
    """The run's checkpointer (None without --checkpoint-dir), made before the model: where the run resumes from
    decides whether the pretrained weights are read at all."""
    if config.checkpoint.directory:
        meta = {
            "model": model_fingerprint(source.shape),
            "model_name": source.name,
            "seq_len": config.data.seq_len,
            "dataset": config.data.dataset,
            "seed": config.schedule.seed,
            "lora": config.lora.settings(),
        }
        return Checkpointer(
            config.checkpoint,
            env,
            device.type,
            meta,
            io,
            replicated,
            config.artifacts,
            config.schedule.steps,
        )
    return None


def log_start(
    config: TrainConfig, env: DistEnv, source: ModelSource, plan: RunPlan, data: PackedData, step: int
) -> None:
    log.info(
        "%s: %.1fM parameters | %d ranks, %s, mesh replicate %d x shard %d | global batch %d = %d x %d ranks x %d "
        "accumulation | %d packed sequences of %d tokens (%.1f epochs in %d steps) | starting after step %d of %d",
        source.name,
        source.shape.num_parameters / 1e6,
        env.world_size,
        config.parallel.sharding_strategy,
        plan.replicate,
        plan.shard,
        plan.global_batch_size,
        plan.batch_size,
        env.world_size,
        plan.grad_accum,
        data.num_samples,
        config.data.seq_len,
        epochs(config.schedule.steps, plan.global_batch_size, data.num_samples),
        config.schedule.steps,
        step,
        config.schedule.steps,
    )
    blocks = data.blocks
    log.info(
        "packing: %d records apart in %d blocks of %d positions, %.1f%% of them filled (the rest padding)%s",
        len(data.record_lengths),
        blocks.count,
        config.data.seq_len,
        100 * blocks.filled() / max(1, blocks.count * config.data.seq_len),
        f"; {blocks.truncated} records longer than a block trained on their first {config.data.seq_len} positions"
        if blocks.truncated
        else "",
    )
    warning = epochs_warning(config.schedule.steps, plan.global_batch_size, data.num_samples)
    if warning:
        log.warning(warning)


def log_validation(config: TrainConfig, val: PackedData, best: BestSoFar) -> None:
    validation = config.validation
    log.info(
        "validation: %d held-out sequences (%d tokens) of %s, evaluated %s%s%s%s",
        val.num_samples,
        len(val.tokens),
        held_out_identity(config.data, validation),
        f"every {validation.every} steps and at the last" if validation.every else "at the last step",
        " | the best checkpoint kept (--keep-best)" if validation.keep_best else "",
        f" | early stop after {validation.early_stop_patience} without improvement"
        if validation.early_stop_patience
        else "",
        "" if best.step is None else f" | best so far: val loss {best.loss:.4f} at step {best.step}",
    )


def first_step(config: TrainConfig, state: TrainState, best: BestSoFar) -> int:
    """The step to train next; past the last when a run resumes from the checkpoint at which it stopped early."""
    if best.stopped and config.validation.early_stop_patience:
        # The checkpoint's step, not best.step: that is the best evaluation's, None when every one was NaN.
        log.info(
            "step %d: training stopped early there (--early-stop-patience); nothing left to train", state.progress.step
        )
        return config.schedule.steps + 1
    return state.progress.step + 1


def note_validation(
    checkpointer: Checkpointer, best: BestSoFar, validation: ValidationConfig, with_held_out: bool
) -> None:
    """What the next save records and keeps: the best evaluation so far in its meta.json (a resumed run carries on
    with it), and with --keep-best that evaluation's checkpoint spared by retention in both tiers."""
    if with_held_out:
        checkpointer.extra_meta = {VALIDATION_META: best.to_meta()}
    checkpointer.spared_step = best.step if validation.keep_best else None


def train(
    config: TrainConfig,
    env: DistEnv,
    source: ModelSource,
    device: torch.device,
    data: PackedData,
    val: PackedData | None = None,
) -> Session:
    """Train on `data`; with a held-out set `val`, evaluate on it (--eval-every, the last step), keep the best
    checkpoint (--keep-best) and stop early (--early-stop-patience)."""
    plan = make_plan(config, env)
    session = set_up(config, env, source, device, plan)
    order = SampleOrder(data.num_samples, config.schedule.seed)
    state = session.state
    adapters = sum(p.numel() for p in state.model.parameters() if p.requires_grad) if config.lora.rank else 0
    if env.is_leader:  # a run carrying on without its metrics file (a new file system) takes its record's back
        restore_metrics(config.metrics.file, config.artifacts.uri)
    reporter = StepReporter(config, env, source.shape, plan.global_batch_size, device, adapters)
    log_start(config, env, source, plan, data, state.progress.step)
    total, every = config.schedule.steps, config.checkpoint.every
    checkpointer = session.checkpointer
    validation, validator = config.validation, None
    best = BestSoFar(held_out=held_out_identity(config.data, validation))
    if val is not None:
        validator = Validator(val, plan.batch_size, env.rank, plan.dp_size, device)
        best = BestSoFar.from_meta(checkpointer.resumed_meta if checkpointer else None, best.held_out)
        if checkpointer and best.stopped and validation.early_stop_patience:  # first_step: nothing left to train
            note_validation(checkpointer, best, validation, with_held_out=True)
            checkpointer.resumed_at_early_stop(state)
        log_validation(config, val, best)
    reporter.restart_clock(state.progress.step)
    sigterm = SigtermHandler(checkpointer, config.checkpoint.stop_wait_s)
    try:
        for step in range(first_step(config, state, best), total + 1):
            consumed = state.progress.consumed_samples
            batch = step_batch(data, order, consumed, plan.global_batch_size, plan.batch_size, env.rank, plan.dp_size)
            result = train_step(state, batch, device, config.optim.grad_clip, config.parallel.fp8)
            state.progress = Progress(step, consumed + plan.global_batch_size)
            if checkpointer:
                with sigterm.held():
                    checkpointer.poll()  # commit a background save that has finished writing
            evaluation: Evaluation | None = None
            if validator and eval_due(step, total, validation.every):
                with reporter.paused():  # not training time: the step time and MFU leave it out
                    evaluation = validator.evaluate(state.model, step)
                best = best.after(evaluation)
            stopping = best.exhausted(validation.early_stop_patience) and evaluation is not None
            if stopping:
                best = replace(best, stopped=True)
            last = step == total or stopping
            # An evaluation's step is always a log step: its record carries the held-out loss beside the training
            # loss of the same step, one record per step for every reader of the metrics file.
            if step % config.metrics.log_every == 0 or last or evaluation:
                stats = checkpointer.stats if checkpointer else None
                reporter.report(step, result, stats, validation_figures(evaluation, best))
            best_now = validation.keep_best and evaluation is not None and best.step == step
            if checkpointer and ((every and step % every == 0) or last or best_now):
                if stopping:
                    checkpointer.end_early(step)
                note_validation(checkpointer, best, config.validation, with_held_out=validator is not None)
                with (
                    sigterm.held()
                ):  # a SIGTERM now settles this save once it is under way (trainer/base/pod/shutdown.py)
                    checkpointer.save(state)
                if env.is_leader:  # the run's record in S3 as of this checkpoint (trainer/record/archive.py)
                    keep_record(config.metrics.file, config.artifacts.uri, total)
                reporter.restart_clock(step)
            maybe_fault("kill_after_step", step)
            if stopping:
                log.info("%s", best.early_stop_line(step, validation.early_stop_patience))
                break
        session.best = best
        if validator and best.loss is not None and best.step is not None:
            log.info(
                "validation: best val loss %.4f (ppl %.2f) at step %d%s",
                best.loss,
                perplexity(best.loss),
                best.step,
                f", its checkpoint kept ({checkpoint_name(best.step)})" if validation.keep_best else "",
            )
        if checkpointer:
            with sigterm.held():
                checkpointer.finish()  # the last save, committed before the export and the exit
    finally:
        sigterm.close()
        reporter.close()
        if checkpointer:
            checkpointer.close()
    return session


def export(config: TrainConfig, session: Session, env: DistEnv, tokenizer: Tokenizer) -> None:
    """The final model in Hugging Face format: into --export-hf, and with --artifacts-uri uploaded by rank 0 to
    <artifacts-uri>/model/ (without --export-hf, exported for that into a directory of its own: beside the checkpoints
    on the shared file system, which has room for the model, else in the temporary directory). Every rank returns
    when the model is in S3, or raises the upload's failure: the job's exit says whether it got there."""
    directory, artifacts = config.checkpoint.export_hf, config.artifacts.uri
    if not directory and not artifacts:
        return
    scratch = None
    if not directory and env.is_leader:
        if config.checkpoint.directory:
            Path(config.checkpoint.directory).mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=config.checkpoint.directory))
    directory = directory or str(scratch or "")  # the other ranks only take part in the gathers
    state = session.state
    lora = config.lora if config.lora.rank else None
    export_hf(
        state.model,
        session.model_config,
        directory,
        config.checkpoint.export_dtype,
        env,
        tokenizer,
        lora,
        config.model.name,
        exported_weights(config, session),
        generation_config(session.model_config, base_directory(session.source), tokenizer),
    )
    failure = None
    if artifacts and env.is_leader:
        try:
            upload_model(Path(directory), artifacts)
            keep_record(config.metrics.file, artifacts, config.schedule.steps, directory)  # with what the export holds
        except (S3Error, OSError) as error:
            failure = str(error)
        finally:
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
    if artifacts:
        # Rank 0's outcome to every rank over the long-timeout group: an upload of many gigabytes outlasts
        # --timeout-minutes, and a rank that left early would let the job end before the model is in S3.
        outcome = [failure]
        dist.broadcast_object_list(outcome, src=0, group=io_group(timedelta(minutes=config.checkpoint.timeout_minutes)))
        if outcome[0]:
            raise InputError(f"--artifacts-uri {artifacts}: the model's upload failed: {outcome[0]}")


def base_directory(source: ModelSource) -> Path | None:
    """A pretrained model's local files (its generation_config.json among them), None for a preset."""
    if not source.pretrained:
        return None
    return source.directory or cached_snapshot(source)


def exported_weights(config: TrainConfig, session: Session) -> dict[str, Any] | None:
    """With --keep-best, the best evaluation's weights loaded into the model (every rank: a collective) unless they
    are the last step's. Which step the export holds, for the log and, in a run with a held-out set, the export's
    provenance file (without one the export is always the last step's, and holds the files it always did)."""
    best, last = session.best, session.state.progress.step
    step = last
    if config.validation.keep_best and best.step is not None and best.step != last and session.checkpointer:
        loaded_from = session.checkpointer.load_model(session.state.model, best.step)
        step = best.step
        log.info(
            "export: the best evaluation's weights, step %d (val loss %.4f), from %s", step, best.loss, loaded_from
        )
    elif config.validation.keep_best and best.step is not None:
        log.info("export: the last step's weights, step %d, the best evaluation (val loss %.4f)", step, best.loss)
    else:
        log.info("export: the last step's weights, step %d", step)
    if not config.validation.held_out():
        return None
    return {
        "step": step,
        "last_step": last,
        "best_val_step": best.step,
        "best_val_loss": best.loss,
        "kept_best": config.validation.keep_best,
        "stopped_early": best.stopped,
    }


def run(config: TrainConfig, env: DistEnv, source: ModelSource, device_type: str) -> None:
    """Tokenise (bad data fails here, before any process group or checkpoint), train, then export."""
    device = pick_device(device_type, env)
    tokenizer, splits = load_data(config, source, env)
    timeouts = timedelta(minutes=config.parallel.timeout_minutes), timedelta(minutes=config.checkpoint.timeout_minutes)
    init_distributed(env, device, *timeouts)
    try:
        session = train(config, env, source, device, splits.train, splits.val)
        export(config, session, env, tokenizer)
        dist.barrier()  # leave together: gloo aborts a process whose peer tears down its connections mid-exit
    finally:
        leave_distributed()
