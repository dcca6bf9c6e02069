"""Per logged step: gather the job-wide figures (collectives on every rank); rank 0 logs and exports them."""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypedDict

import torch
import torch.distributed as dist

from trainer.base.flags.config import TrainConfig
from trainer.base.hardware.chips import PEAK_BF16_FLOPS, chip_for_device_name
from trainer.base.metrics.figures import (
    MetricsSink,
    StepMetrics,
    model_flops_utilisation,
    training_flops_per_token,
)
from trainer.base.model.presets import ModelShape
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.stats import CheckpointStats
from trainer.evaluation import BestSoFar, Evaluation

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    loss: torch.Tensor
    """This rank's share of the global mean loss (the sum over ranks is the step's loss)."""
    grad_norm: torch.Tensor
    lr: float
    """The learning rate this step used."""


def peak_memory_bytes(device: torch.device) -> int:
    """Peak of this process: GPU memory allocated by torch; on CPU the peak resident set."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return peak_rss_bytes()


def peak_reserved_bytes(device: torch.device) -> int:
    """GPU memory the caching allocator reserved at its peak (what nvidia-smi sees of torch); 0 on CPU, which has no
    such allocator (reported as None)."""
    return int(torch.cuda.max_memory_reserved(device)) if device.type == "cuda" else 0


def peak_rss_bytes() -> int:
    """This process's own peak resident set: VmHWM on Linux. ru_maxrss is not that: Linux folds the high-water mark
    of the image a process exec'd from into it, so a trainer started by a large parent (a test runner, an agent)
    would report the parent's size at fork time whenever that is the larger."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux; other systems: best effort


def peak_flops(config: TrainConfig, device: torch.device) -> float | None:
    """Per-device peak for MFU: --peak-tflops, else the CUDA device's datasheet figure, else unknown."""
    if config.metrics.peak_tflops:
        return config.metrics.peak_tflops * 1e12
    if device.type == "cuda":
        chip = chip_for_device_name(torch.cuda.get_device_name(device))
        return PEAK_BF16_FLOPS.get(chip) if chip else None
    return None


class CheckpointFigures(TypedDict):
    """The StepMetrics fields that checkpoint_figures fills, with their types."""

    checkpoint_save_s: float | None
    checkpoint_blocked_s: float | None
    checkpoint_bytes: int | None
    checkpoint_load_s: float | None
    checkpoint_read_bytes: int | None
    checkpoint_s3_save_s: float | None
    checkpoint_s3_bytes: int | None
    checkpoint_s3_failed_saves: int


def checkpoint_figures(stats: CheckpointStats | None) -> CheckpointFigures:
    """The StepMetrics fields of the checkpoint figures (rank 0's: it commits saves and writes the metrics)."""
    stats = stats or CheckpointStats()
    return {
        "checkpoint_save_s": stats.save_s,
        "checkpoint_blocked_s": stats.blocked_s,
        "checkpoint_bytes": stats.bytes,
        "checkpoint_load_s": stats.load_s,
        "checkpoint_read_bytes": stats.read_bytes,
        "checkpoint_s3_save_s": stats.s3_save_s,
        "checkpoint_s3_bytes": stats.s3_bytes,
        "checkpoint_s3_failed_saves": stats.s3_failed_saves,
    }


class ValidationFigures(TypedDict):
    """The StepMetrics fields of the held-out set (trainer/evaluation.py)."""

    val_loss: float | None
    val_perplexity: float | None
    best_val_loss: float | None
    best_val_step: int | None


def validation_figures(evaluation: Evaluation | None, best: BestSoFar) -> ValidationFigures:
    """The evaluation of this step, if it had one (a record carries val_loss only at an evaluation's step, so a chart
    of the metrics file plots each evaluation once), and the best so far, in every record once there is one."""
    return {
        "val_loss": evaluation.loss if evaluation else None,
        "val_perplexity": evaluation.perplexity if evaluation else None,
        "best_val_loss": best.loss,
        "best_val_step": best.step,
    }


class StepReporter:
    def __init__(
        self,
        config: TrainConfig,
        env: DistEnv,
        shape: ModelShape,
        global_batch: int,
        device: torch.device,
        adapters: int = 0,
    ) -> None:
        """`adapters`: the parameters LoRA trains (0: full fine-tuning), for the FLOPs of MFU."""
        self.env, self.device, self.total_steps = env, device, config.schedule.steps
        self.tokens_per_step = global_batch * config.data.seq_len
        self.flops_per_token = training_flops_per_token(shape, config.data.seq_len, adapters)
        self.peak = peak_flops(config, device)
        metrics = config.metrics
        self.sink = MetricsSink(metrics.file, metrics.port, metrics.host) if env.is_leader else None
        self.tokens = 0
        self.restart_clock(0)

    def restart_clock(self, step: int) -> None:
        """Time from here: the next report covers the steps after `step` (setup and saves are not training)."""
        self.last_time, self.last_cpu_time, self.last_step = time.perf_counter(), time.process_time(), step

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not training (an evaluation): the next report's step time and CPU time leave it out.
        On CUDA the step's queued work is waited for first, so none of it is counted as the pause."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.last_time += time.perf_counter() - wall
            self.last_cpu_time += time.process_time() - cpu

    def report(
        self,
        step: int,
        result: StepResult,
        checkpoint: CheckpointStats | None = None,
        validation: ValidationFigures | None = None,
    ) -> None:
        loss = result.loss.clone()
        dist.all_reduce(loss)
        peaks = [peak_memory_bytes(self.device), peak_reserved_bytes(self.device)]
        memory = torch.tensor(peaks, dtype=torch.int64, device=self.device)
        dist.all_reduce(memory, op=dist.ReduceOp.MAX)  # the busiest rank is the one that limits the job
        # Read before the clock: on a GPU it waits for the interval's queued work, which the interval's time must
        # include (the host runs ahead of the device by up to a queue of kernels).
        loss_value = float(loss)
        steps = step - self.last_step
        step_time = (time.perf_counter() - self.last_time) / steps
        cpu_time = (time.process_time() - self.last_cpu_time) / steps
        self.tokens += steps * self.tokens_per_step
        tokens_per_second = self.tokens_per_step / step_time
        per_gpu = tokens_per_second / self.env.world_size
        metrics = StepMetrics(
            step=step,
            loss=loss_value,
            tokens_per_second=tokens_per_second,
            tokens_per_second_per_gpu=per_gpu,
            mfu=model_flops_utilisation(per_gpu, self.flops_per_token, self.peak) if self.peak else None,
            step_time_s=step_time,
            peak_memory_bytes=int(memory[0]),
            lr=result.lr,
            grad_norm=float(result.grad_norm),
            world_size=self.env.world_size,
            restarts=self.env.group_restarts,
            tokens=self.tokens,
            cpu_time_per_step_s=cpu_time,
            peak_reserved_bytes=int(memory[1]) if self.device.type == "cuda" else None,
            **checkpoint_figures(checkpoint),
            **(validation or validation_figures(None, BestSoFar())),
        )
        if self.sink:
            log.info(metrics.log_line(self.total_steps))
            self.sink.write(metrics)
        self.restart_clock(step)

    def close(self) -> None:
        if self.sink:
            self.sink.close()
