"""Training metrics: the figures, their formulas, and where they go (JSON lines and Prometheus).

Importable without torch: the Grafana dashboards and their test read METRIC_FIELDS, the single list of
metric names the trainer serves. Only rank 0 creates a MetricsSink; the other ranks stay quiet.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainer.base.model.presets import ModelShape
from trainer.base.units import GIB

# JSON key in --metrics-file -> (Prometheus gauge name, help text). Both outputs carry the same figures.
METRIC_FIELDS: dict[str, tuple[str, str]] = {
    "step": ("trainer_step", "Last completed optimizer step"),
    "loss": ("trainer_loss", "Mean cross-entropy per trained token over the global batch"),
    "tokens_per_second": ("trainer_tokens_per_second", "Trained tokens per second, whole job"),
    "tokens_per_second_per_gpu": ("trainer_tokens_per_second_per_gpu", "Trained tokens per second per rank"),
    "mfu": ("trainer_mfu", "Model FLOPs utilisation, 0..1 (NaN when the device peak is unknown)"),
    "step_time_s": ("trainer_step_time_seconds", "Mean wall time of one optimizer step since the last log"),
    "peak_memory_bytes": ("trainer_peak_memory_bytes", "Peak memory of the busiest rank (GPU allocated or RSS)"),
    "lr": ("trainer_learning_rate", "Learning rate of the last step"),
    "grad_norm": ("trainer_grad_norm", "Global gradient norm before clipping"),
    "world_size": ("trainer_world_size", "Number of ranks"),
    "restarts": ("trainer_restarts", "Times the workers were started again in this run, agreed across nodes"),
    "peak_reserved_bytes": (
        "trainer_peak_reserved_bytes",
        "Peak GPU memory the caching allocator reserved on the busiest rank (NaN on CPU)",
    ),
    "checkpoint_save_s": ("trainer_checkpoint_save_seconds", "Wall time of the last checkpoint save, start to commit"),
    "checkpoint_blocked_s": (
        "trainer_checkpoint_blocked_seconds",
        "Time the last checkpoint save held training up (all of it, or the copy to host memory when asynchronous)",
    ),
    "checkpoint_bytes": ("trainer_checkpoint_bytes", "Tensor bytes of the last checkpoint"),
    "checkpoint_load_s": ("trainer_checkpoint_load_seconds", "Wall time of the checkpoint load at start"),
    "checkpoint_read_bytes": (
        "trainer_checkpoint_read_bytes",
        "Bytes read from the checkpoint files by all ranks at start",
    ),
    "checkpoint_s3_save_s": (
        "trainer_checkpoint_s3_save_seconds",
        "Wall time of the last checkpoint save to S3 (--artifacts-uri), start to commit",
    ),
    "checkpoint_s3_bytes": ("trainer_checkpoint_s3_bytes", "Tensor bytes of the last checkpoint saved to S3"),
    "val_loss": ("trainer_val_loss", "Mean cross-entropy per token over the held-out set at the last evaluation"),
    "val_perplexity": (
        "trainer_val_perplexity",
        "exp(val_loss): perplexity of the held-out set at the last evaluation",
    ),
    "best_val_loss": ("trainer_best_val_loss", "Lowest validation loss of this run so far"),
    "best_val_step": (
        "trainer_best_val_step",
        "Step of the lowest validation loss so far (the --keep-best checkpoint)",
    ),
    "checkpoint_s3_failed_saves": (
        "trainer_checkpoint_s3_failed_saves",
        "Checkpoint saves to S3 that failed in this run (training went on from the copy in --checkpoint-dir)",
    ),
    # The fabric preflight (trainer/checks/fabric_preflight.py): bus bandwidth (nccl-tests' busbw, GB/s = 1e9 bytes/s)
    # of this start
    # of the workers, measured once before step 1; every record of the start carries them (set_start_figures).
    "preflight_intra_all_gather_gb_per_s": (
        "trainer_preflight_intra_all_gather_gigabytes_per_second",
        "Fabric preflight: all-gather bus bandwidth within a node, the slowest node's (NaN with one rank a node)",
    ),
    "preflight_intra_reduce_scatter_gb_per_s": (
        "trainer_preflight_intra_reduce_scatter_gigabytes_per_second",
        "Fabric preflight: reduce-scatter bus bandwidth within a node, the slowest node's",
    ),
    "preflight_inter_all_reduce_gb_per_s": (
        "trainer_preflight_inter_all_reduce_gigabytes_per_second",
        "Fabric preflight: all-reduce bus bandwidth across nodes on one rail, the slowest rail's (NaN on one node)",
    ),
    "preflight_expected_intra_gb_per_s": (
        "trainer_preflight_expected_intra_gigabytes_per_second",
        "Bus bandwidth the preflight expected within a node (--preflight-expect-intra-gb-per-s; NaN: none given)",
    ),
    "preflight_expected_inter_gb_per_s": (
        "trainer_preflight_expected_inter_gigabytes_per_second",
        "Bus bandwidth the preflight expected on a rail across nodes (--preflight-expect-inter-gb-per-s)",
    ),
    "preflight_slowest_fraction": (
        "trainer_preflight_slowest_fraction",
        "Fabric preflight: the slowest node's figure over the expected or the median node's, lowest over levels",
    ),
}

# The fabric preflight's figures of this start of the workers (trainer/checks/fabric_preflight.py, run by
# trainer/main.py before the
# step reporter exists): set once per worker process, carried by every StepMetrics it makes, so the Prometheus gauges
# hold them for the whole run and any record of the metrics file has them (sizing/scaling.py reads them).
PREFLIGHT_FIELDS = tuple(key for key in METRIC_FIELDS if key.startswith("preflight_"))
_start_figures: dict[str, float] = {}


def set_start_figures(figures: dict[str, float]) -> None:
    """Record this start's preflight figures (keys of PREFLIGHT_FIELDS) for every StepMetrics made after."""
    unknown = set(figures) - set(PREFLIGHT_FIELDS)
    if unknown:
        raise ValueError(f"not preflight figures: {sorted(unknown)}")
    _start_figures.update(figures)


# A start whose fabric preflight failed trains no step, yet the metrics file shows it: rank 0 writes one record of step
# 0 with the preflight's figures and the nodes it named (preflight_failure_record), marked with this field, which the
# readers of training figures skip (trainer/base/metrics/file.py).
PREFLIGHT_FAILED_FIELD = "preflight_failed"


def preflight_failure_record(
    figures: dict[str, float], bad_nodes: list[str], world_size: int, restarts: int
) -> dict[str, Any]:
    """The metrics file's record of a start the preflight ended: every PREFLIGHT_FIELDS key (None where not measured),
    the fields every record carries (trainer/base/metrics/file.py REQUIRED_FIELDS; no tokens trained), the named
    nodes."""
    unknown = set(figures) - set(PREFLIGHT_FIELDS)
    if unknown:
        raise ValueError(f"not preflight figures: {sorted(unknown)}")
    return {
        "time": time.time(),
        "step": 0,
        "world_size": world_size,
        "restarts": restarts,
        "tokens_per_second": 0.0,
        **{key: figures.get(key) for key in PREFLIGHT_FIELDS},
        "preflight_bad_nodes": list(bad_nodes),
        PREFLIGHT_FAILED_FIELD: True,
    }


def append_record(file: str, record: dict[str, Any]) -> None:
    """One JSON line at the end of --metrics-file, as MetricsSink.write appends it."""
    path = Path(file)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(record) + "\n")


# Figures of the last evaluation: a record carries them only at an evaluation's step, and their gauges keep that
# value until the next one (a scrape between evaluations would otherwise read NaN and Grafana show no line).
HELD_BETWEEN_RECORDS = frozenset({"val_loss", "val_perplexity"})


def training_flops_per_token(shape: ModelShape, seq_len: int, adapters: int = 0) -> float:
    """Forward + backward FLOPs per token: 6 N + 12 L H T.

    6 N: two FLOPs per multiply-add, forward plus twice that in backward, over the N parameters that take part
    in matrix multiplies (the input embedding is a lookup; a tied embedding still serves as the output layer).
    12 L H T: the attention scores and weighted values per layer (PaLM, Chowdhery et al. 2022, appendix B;
    H = the attention width, heads x head_dim, which is the hidden size but where a config sets head_dim apart,
    T = sequence length). Recomputation by activation checkpointing is not counted, as usual
    for MFU.
    With LoRA (`adapters`: the parameters it trains) the frozen base computes no weight gradients, only the
    gradients of its inputs: 4 N for the base, 6 A for the adapters, and the same 12 L H T.
    """
    matmul_params = shape.num_parameters - (0 if shape.tie_word_embeddings else shape.vocab_size * shape.hidden_size)
    attention = 12.0 * shape.num_layers * shape.q_width * seq_len
    if adapters:
        return 4.0 * matmul_params + 6.0 * adapters + attention
    return 6.0 * matmul_params + attention


def model_flops_utilisation(tokens_per_second_per_device: float, flops_per_token: float, peak_flops: float) -> float:
    return tokens_per_second_per_device * flops_per_token / peak_flops


@dataclass
class StepMetrics:
    step: int
    loss: float
    tokens_per_second: float
    tokens_per_second_per_gpu: float
    mfu: float | None
    step_time_s: float
    peak_memory_bytes: int
    lr: float
    grad_norm: float
    world_size: int
    restarts: int
    tokens: int
    """Tokens trained on so far in this run, counting from the resumed step."""
    cpu_time_per_step_s: float
    """Rank 0's process CPU time (all threads) per step: host-side work, unaffected by waiting for a busy CPU."""
    peak_reserved_bytes: int | None = None
    """Max over ranks of torch.cuda.max_memory_reserved: allocated plus what the caching allocator keeps (CPU: None)."""
    checkpoint_save_s: float | None = None
    checkpoint_blocked_s: float | None = None
    checkpoint_bytes: int | None = None
    checkpoint_load_s: float | None = None
    checkpoint_read_bytes: int | None = None
    checkpoint_s3_save_s: float | None = None
    checkpoint_s3_bytes: int | None = None
    checkpoint_s3_failed_saves: int = 0
    """The last save, to each tier, and the load at start (trainer/checkpoint/stats.py CheckpointStats); None before
    one."""
    val_loss: float | None = None
    val_perplexity: float | None = None
    best_val_loss: float | None = None
    best_val_step: int | None = None
    """The last evaluation of the held-out set and the best so far (--val-split, --val-dataset); None before one."""
    preflight_intra_all_gather_gb_per_s: float | None = None
    preflight_intra_reduce_scatter_gb_per_s: float | None = None
    preflight_inter_all_reduce_gb_per_s: float | None = None
    preflight_expected_intra_gb_per_s: float | None = None
    preflight_expected_inter_gb_per_s: float | None = None
    preflight_slowest_fraction: float | None = None
    """The fabric preflight's figures of this start of the workers (set_start_figures); None without a preflight."""

    def __post_init__(self) -> None:
        # The step reporter (trainer/record/reporting.py) knows nothing of the preflight, which ran before it existed.
        for key, value in _start_figures.items():
            if getattr(self, key) is None:
                setattr(self, key, value)

    def log_line(self, total_steps: int) -> str:
        mfu = "n/a" if self.mfu is None else f"{100 * self.mfu:.1f}%"
        return (
            f"step {self.step}/{total_steps} | loss {self.loss:.4f} | lr {self.lr:.2e} | grad norm {self.grad_norm:.3f}"
            f" | {self.tokens_per_second:,.0f} tok/s ({self.tokens_per_second_per_gpu:,.0f}/rank) | mfu {mfu}"
            f" | step {self.step_time_s:.3f}s | peak mem {self.peak_memory_bytes / GIB:.2f} GiB"
            + ("" if self.peak_reserved_bytes is None else f" ({self.peak_reserved_bytes / GIB:.2f} reserved)")
            + ("" if self.val_loss is None else f" | val loss {self.val_loss:.4f} (ppl {self.val_perplexity:.2f})")
        )


class MetricsSink:
    """Rank 0's outputs: an append-only JSON-lines file and a Prometheus endpoint, both optional."""

    def __init__(self, file: str | None, port: int, host: str) -> None:
        self.file = Path(file) if file else None
        if self.file:
            self.file.parent.mkdir(parents=True, exist_ok=True)
        self.gauges: dict[str, Any] = {}
        self.server: Any = None
        if port:
            from prometheus_client import CollectorRegistry, Gauge, start_http_server

            registry = CollectorRegistry()
            self.gauges = {key: Gauge(name, text, registry=registry) for key, (name, text) in METRIC_FIELDS.items()}
            self.server, _ = start_http_server(port, addr=host, registry=registry)

    def write(self, metrics: StepMetrics) -> None:
        record = {"time": time.time(), **asdict(metrics)}
        if self.file:
            with open(self.file, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        for key, gauge in self.gauges.items():
            value = record[key]
            if value is None and key in HELD_BETWEEN_RECORDS:
                continue
            gauge.set(math.nan if value is None else value)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
