"""The trainer's configuration: one tree of typed dataclasses, parsed from the command line.

Torch-free on purpose: the job builder parses a manifest's trainer arguments with `parse_args` to check them
before anything is deployed. Each option is declared once, with `option(...)` (options.py beside it): its default, flag,
choices, checks, its rules across options, and the stack's job.* key and the sizing's flag where they take it; the
docstring under the field is its `--help` text. `config_problems` is every declared rule the config breaks, in the
trainer's words; the stack's preview and the sizing check the same rules.

    from trainer.base.flags.config import parse_args
    config = parse_args(["--model", "tiny", "--steps", "10"])
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from trainer.base.flags import options
from trainer.base.flags.options import (
    Across,
    Check,
    Excludes,
    Facts,
    OnlyWith,
    Requires,
    StackKey,
    WithModel,
    WithWorld,
    non_empty,
    non_negative,
    option,
    positive,
)
from trainer.base.model.presets import ModelShape

SHARDING_STRATEGIES = ("FULL_SHARD", "HYBRID_SHARD", "SHARD_GRAD_OP", "NO_SHARD")
MIXED_PRECISIONS = ("bf16", "fp16", "fp32")
ACTIVATION_CHECKPOINTING = ("none", "full", "selective", "selective-mm")
# The dtype of HYBRID_SHARD's all-reduce across replica groups (--all-reduce-dtype).
ALL_REDUCE_DTYPES = ("fp32", "bf16")
DATASET_FORMATS = ("auto", "text", "instruction", "dialogsum", "chat")
LR_SCHEDULES = ("cosine", "linear", "constant")
DEVICES = ("auto", "cuda", "cpu")
EXPORT_DTYPES = ("bf16", "fp16", "fp32")
# The attention and MLP projections of every supported family (Llama, Mistral, Qwen2, Qwen3: transformers'
# modeling_*.py names), the targets torchtune's and llama-recipes' LoRA recipes train too.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# Only HYBRID_SHARD has replica groups: its mesh's replicate dimension, and the all-reduce across it
# (trainer/parallel/all_reduce.py); NO_SHARD's all-reduce is its whole gradient reduction, kept in fp32.
ONLY_HYBRID_SHARD = OnlyWith("parallel.sharding_strategy", "HYBRID_SHARD")
# --val-split's upper bound: holding out half the data or more leaves training the smaller part.
MAX_VAL_SPLIT = 0.5
HELD_OUT_FRACTION = Check(
    lambda split: 0 <= split < MAX_VAL_SPLIT,
    f"must be at least 0 and below {MAX_VAL_SPLIT:g}",
    f"a fraction from 0 up to, not including, {MAX_VAL_SPLIT:g} (0: no held-out split)",
)
TCP_PORT = Check(lambda port: 0 <= port <= 65535, "must be 0 (off) or a TCP port", "0 (off) or a TCP port")


def lora_target_names(targets: str) -> list[str]:
    """--lora-targets' comma-separated names."""
    return [name.strip() for name in targets.split(",") if name.strip()]


def unknown_lora_targets(targets: str) -> str:
    unknown = [name for name in lora_target_names(targets) if name not in LORA_TARGETS]
    if unknown:
        return f"{','.join(unknown)}: not a decoder layer's linear layer"
    return "no name given"


LORA_TARGET_NAMES = Check(
    lambda targets: bool(lora_target_names(targets)) and set(lora_target_names(targets)) <= set(LORA_TARGETS),
    f"must name one or more of the decoder layers' linear layers, comma-separated: {','.join(LORA_TARGETS)}",
    f"a non-empty list of the decoder layers' linear layers: {', '.join(LORA_TARGETS)}",
    unknown_lora_targets,
)


def fits_the_model(config: TrainConfig, shape: ModelShape) -> str | None:
    """--seq-len against the model's positions, and against Mistral's window: trainer/model/attention.py is full
    causal, so past the window it would attend where the model never did."""
    seq_len, positions, window = config.data.seq_len, shape.max_position_embeddings, shape.sliding_window
    if seq_len > positions:
        return f"exceeds the model's max_position_embeddings {positions} ({shape.name}); expected at most {positions}"
    if window is not None and seq_len > window:
        return (
            f"exceeds the model's sliding_window {window} ({shape.name}); the trainer's attention is full causal, "
            f"expected at most {window}"
        )
    return None


def whole_micro_steps(config: TrainConfig, world_size: int) -> str | None:
    """Each optimizer step is global batch / (batch x world size) micro steps on every rank: a whole number."""
    schedule = config.schedule
    per_micro_step = schedule.batch_size * world_size
    if schedule.global_batch_size is None or per_micro_step < 1 or schedule.global_batch_size % per_micro_step == 0:
        return None
    return (
        f"not a multiple of {{schedule.batch_size}} x the world size ({schedule.batch_size} x {world_size} = "
        f"{per_micro_step} sequences per micro step); expected a multiple of {per_micro_step}"
    )


def not_the_training_records(config: TrainConfig) -> str | None:
    """--val-dataset read as --dataset in its split (trainer/data/packing.py val_dataset_config) is the very records
    training reads, and its loss a training loss."""
    validation = config.validation
    if not validation.dataset or not validation.reads_training_records(config.data):
        return None
    return (
        f"is {{data.dataset}}, read in the same split ({config.data.dataset_split}): its records are trained on; give "
        "{validation.dataset_split} another split (such as validation), hold records out with {validation.split} "
        "(such as 0.02) instead, or give a data set of held-out records"
    )


# The held-out set (trainer/evaluation.py): a split of --dataset or a data set of its own, not both; what evaluates it,
# keeps the best checkpoint by it or stops by it needs one.
ONE_HELD_OUT_SET = Excludes(
    "validation.split", "choose one held-out set: a split of {data.dataset} or a data set of its own"
)
NEEDS_HELD_OUT = Requires(
    ("validation.split", "validation.dataset"),
    "a held-out set: {validation.split} (such as 0.02) or {validation.dataset}",
)


@dataclass
class ModelConfig:
    name: str = option(
        "tiny",
        "--model",
        stack=StackKey(
            "model",
            "meta-llama/Llama-2-7b-hf",
            "HF hub id, path in the image, preset name, or an s3:// directory of a model in Hugging Face format "
            "(staged once per run; read-only to the pods).",
        ),
    )
    """Model: a preset name (tiny, small, llama2-7b, llama2-13b, llama2-70b, llama3.1-8b, llama3.1-70b,
    llama3.2-1b, llama3.2-3b, qwen2.5-7b, qwen3-8b, mistral-7b-v0.3: built from its shape and randomly initialised
    from --seed), a local directory with config.json and *.safetensors, or a Hugging Face hub id (pretrained
    weights); a Llama, Mistral, Qwen2 or Qwen3 model."""
    tokenizer: str | None = option(None, "--tokenizer")
    """Tokenizer: a hub id or local directory, or 'byte' for the built-in byte-level tokenizer (no download).
    Default: the model's own; 'byte' for presets without a hub checkpoint (tiny, small)."""


@dataclass
class DataConfig:
    dataset: str = option(
        "synthetic",
        "--dataset",
        stack=StackKey(
            "dataset",
            "knkarthick/dialogsum",
            "HF dataset id, a path inside the pod, or an s3:// .jsonl, .json or .txt object or a prefix of them "
            "(staged once per run; read-only to the pods).",
        ),
    )
    """Dataset: a local .jsonl/.json/.txt file, a Hugging Face dataset id, or 'synthetic' (deterministic
    generated text, no file needed)."""
    dataset_format: str = option(
        "auto",
        "--dataset-format",
        choices=DATASET_FORMATS,
        stack=StackKey(
            "datasetFormat",
            doc="The records' format (the trainer's --dataset-format): text, instruction, dialogsum or chat "
            "(docs/data.md); auto picks it from the first record's fields.",
        ),
    )
    """Record format: text (a 'text' field or plain lines), instruction (alpaca-style instruction/input/output),
    dialogsum (dialogue/summary), chat ('messages': a list of {role, content} turns, rendered by the tokenizer's
    chat template; only the assistant's turns are learnt). auto picks from the first record's fields."""
    dataset_split: str = option("train", "--dataset-split")
    """Split to load for a Hugging Face dataset id."""
    dataset_config: str | None = option(None, "--dataset-config")
    """Configuration name for a Hugging Face dataset id (the second argument of datasets.load_dataset)."""
    seq_len: int = option(
        256,
        "--seq-len",
        checks=(positive(),),
        rules=(WithModel(fits_the_model),),
        stack=StackKey("seqLen", 4096, "Tokens per sequence."),
        sizing=True,
    )
    """Tokens per packed training sequence; at most the model's max_position_embeddings."""
    cache_dir: str | None = option(None, "--data-cache-dir")
    """Directory shared by all ranks for the tokenised data set: rank 0 (or `python -m trainer.stage`) writes it
    once as memory-mapped arrays and every rank maps it. Without it, every rank tokenises the data set itself."""
    workers: int = option(0, "--data-workers")
    """Processes that tokenise the data set (a batch of records each at a time); 0: one per CPU the process may run
    on, at most 32."""


@dataclass
class ParallelConfig:
    sharding_strategy: str = option(
        "FULL_SHARD",
        "--sharding-strategy",
        choices=SHARDING_STRATEGIES,
        stack=StackKey("shardingStrategy", doc="FSDP sharding strategy."),
    )
    """FULL_SHARD: shard parameters, gradients and optimizer state over all ranks, reshard after forward.
    SHARD_GRAD_OP: the same, but keep parameters gathered between forward and backward. HYBRID_SHARD: shard
    within a replica group, replicate across groups (2-D mesh). NO_SHARD: every rank holds everything."""
    replicate_groups: int | None = option(None, "--replicate-groups", only_with=ONLY_HYBRID_SHARD)
    """HYBRID_SHARD only: number of replica groups (the mesh's replicate dimension). Default: the number of nodes
    (WORLD_SIZE / LOCAL_WORLD_SIZE), so parameters are sharded within a node and replicated across nodes."""
    mixed_precision: str = option(
        "bf16",
        "--mixed-precision",
        choices=MIXED_PRECISIONS,
        stack=StackKey("mixedPrecision", doc="Mixed precision."),
        sizing=True,
    )
    """Compute dtype of forward/backward; parameters, gradient reduction and optimizer state stay in fp32 (with
    --lora-rank, the frozen base weights are held in this dtype and only the adapters in fp32)."""
    activation_checkpointing: str = option(
        "none",
        "--activation-checkpointing",
        choices=ACTIVATION_CHECKPOINTING,
        stack=StackKey("activationCheckpointing", doc="Activation checkpointing."),
        sizing=True,
    )
    """none; full (recompute each decoder layer in backward); selective (keep matmul and attention outputs,
    recompute the cheap elementwise operations); selective-mm (as selective, but every second matmul of a layer is
    recomputed too: torchtitan's op-level policy, less memory than selective for some recompute)."""
    all_reduce_dtype: str = option(
        "fp32",
        "--all-reduce-dtype",
        choices=ALL_REDUCE_DTYPES,
        only_with=ONLY_HYBRID_SHARD,
        stack=StackKey(
            "allReduceDtype",
            doc="HYBRID_SHARD only: dtype of the gradients' all-reduce between nodes; bf16 halves its bytes, the "
            "gradients stay fp32.",
        ),
        sizing=True,
    )
    """HYBRID_SHARD only: dtype of the gradients' all-reduce across replica groups (between nodes). bf16 halves its
    bytes; the reduce-scatter within a group, the sum's result and the gradients stay fp32."""
    compile: bool = option(
        False,
        "--compile",
        action="store_true",
        stack=StackKey("compile", doc="torch.compile each decoder block."),
        sizing=True,
    )
    """torch.compile each decoder layer."""
    fp8: bool = option(False, "--fp8", action="store_true")
    """FP8 linear layers in the decoder blocks through torchao (CUDA GPUs of compute capability 8.9+)."""
    device: str = option("auto", "--device", choices=DEVICES)
    """auto: cuda when available, else cpu. NCCL is used on CUDA, gloo on CPU."""
    timeout_minutes: float = option(10.0, "--timeout-minutes", checks=(positive(integer=False),))
    """Longest a training collective waits for the other ranks; then the rank fails and torchrun restarts the
    group. Checkpoints, weight downloads and tokenisation wait under --checkpoint-timeout-minutes instead."""


@dataclass
class OptimConfig:
    lr: float = option(
        3e-4, "--lr", checks=(positive(integer=False),), stack=StackKey("learningRate", 2e-5, "Peak learning rate.")
    )
    """Peak learning rate of AdamW."""
    lr_schedule: str = option("cosine", "--lr-schedule", choices=LR_SCHEDULES)
    """Decay after warmup, from --lr down to --min-lr at the last step."""
    warmup_steps: int = option(0, "--warmup-steps", checks=(non_negative(),))
    """Steps of linear warmup from lr/warmup_steps up to --lr."""
    min_lr: float | None = option(None, "--min-lr")
    """Learning rate at the last step for cosine and linear schedules (default 0)."""
    weight_decay: float = option(0.0, "--weight-decay", checks=(non_negative(),))
    """AdamW decoupled weight decay, applied to matrices only (not to norms)."""
    grad_clip: float = option(1.0, "--grad-clip", checks=(non_negative(),))
    """Clip the global gradient norm to this value; 0 turns clipping off."""


@dataclass
class ScheduleConfig:
    batch_size: int = option(
        2,
        "--batch-size",
        checks=(positive(),),
        stack=StackKey("batchSize", 1, "Sequences per GPU per micro step."),
        sizing=True,
    )
    """Sequences per rank per micro step."""
    global_batch_size: int | None = option(
        None,
        "--global-batch-size",
        checks=(positive(),),
        rules=(WithWorld(whole_micro_steps),),
        stack=StackKey(
            "globalBatchSize",
            doc="Sequences per optimizer step; default: batchSize x all GPUs. Kept for any world size.",
        ),
        sizing=True,
    )
    """Sequences per optimizer step, for any world size: gradient accumulation = global / (batch x ranks).
    Default: batch size x ranks. Set it explicitly when the world size may change between restarts."""
    steps: int = option(100, "--steps", checks=(positive(),), stack=StackKey("steps", 1000, "Optimizer steps."))
    """Optimizer steps to train in total (a resumed run continues up to this number)."""
    seed: int = option(0, "--seed")
    """Seeds the weight initialisation of presets and the order of the training samples."""


@dataclass
class CheckpointConfig:
    directory: str | None = option(None, "--checkpoint-dir")
    """Directory of step_<N> checkpoints (shared by all ranks). The run resumes from the newest complete one."""
    every: int = option(
        0,
        "--checkpoint-every",
        checks=(non_negative(),),
        stack=StackKey("checkpointEvery", 100, "Steps between checkpoints."),
    )
    """Save every N steps (and after the last step); 0 saves after the last step only."""
    keep: int = option(3, "--keep-checkpoints", checks=(positive(),))
    """Number of newest checkpoints to keep; older ones are deleted after a successful save."""
    export_hf: str | None = option(None, "--export-hf")
    """Write the final model to this directory in Hugging Face format (config.json, *.safetensors)."""
    export_dtype: str = option("bf16", "--export-dtype", choices=EXPORT_DTYPES)
    """Dtype of the exported weights."""
    async_save: bool = option(False, "--async-checkpoint", action="store_true")
    """Write checkpoints in the background: training waits only while the state is copied to host memory; the next
    save (or the end of training) waits for the write to finish and commits it."""
    threads: int = option(1, "--checkpoint-threads", checks=(positive(),))
    """Writer threads per rank (torch.distributed.checkpoint FileSystemWriter thread_count), each its own file."""
    stop_wait_s: float = option(20.0, "--checkpoint-stop-wait-seconds", checks=(non_negative(),))
    """After SIGTERM: how long to wait for a checkpoint still being written before abandoning it (keep it below
    torchrun's --shutdown-timeout, 30 s by default)."""
    timeout_minutes: float = option(30.0, "--checkpoint-timeout-minutes", checks=(positive(integer=False),))
    """Longest wait for a checkpoint save or load, a weight download or the tokenisation of the data set by another
    rank (a process group of its own, so that training keeps the shorter --timeout-minutes)."""


@dataclass
class ArtifactsConfig:
    uri: str | None = option(None, "--artifacts-uri")
    """s3:// prefix of this run's durable artifacts: checkpoints (the durable tier, <uri>/checkpoints/step_<N>, written
    with the S3 connector for PyTorch beside the fast tier in --checkpoint-dir) and the final model in Hugging Face
    format (<uri>/model, uploaded after --export-hf)."""
    checkpoint_every: int = option(0, "--s3-checkpoint-every", checks=(non_negative(),))
    """With --artifacts-uri: write every Nth step's checkpoint to S3 as well (a multiple of --checkpoint-every), and
    always the last step's; 0: every checkpoint."""
    resume_from: str | None = option(
        None,
        "--resume-from",
        stack=StackKey(
            "resumeFrom",
            doc="An s3:// checkpoint (.../checkpoints/step_<N>) or directory of them (.../checkpoints, the newest "
            "complete one) to start from when the run has none of its own, such as an earlier stack's run; any world "
            "size.",
        ),
    )
    """s3:// URI to start from when --checkpoint-dir holds no checkpoint: a step_<N> checkpoint, or a directory of
    them (the newest complete one). Any world size and sharding strategy."""


@dataclass
class LoraConfig:
    rank: int = option(
        0,
        "--lora-rank",
        checks=(non_negative(" (0 is full fine-tuning)"),),
        stack=StackKey(
            "lora.rank",
            doc="LoRA rank (the trainer's --lora-rank): train low-rank adapters (PEFT) instead of every weight, the "
            "base frozen in job.mixedPrecision with no optimizer state; checkpoints hold the adapters, the export is "
            "the merged model plus the adapter. 0 is full fine-tuning.",
        ),
        sizing=True,
    )
    """LoRA rank r: train low-rank adapters (PEFT) beside frozen base weights kept in the compute dtype; 0 is full
    fine-tuning."""
    alpha: int = option(
        32,
        "--lora-alpha",
        stack=StackKey("lora.alpha", doc="LoRA alpha: the adapters' output is scaled by alpha / rank."),
    )
    """LoRA alpha (an integer, as peft.LoraConfig takes it): the adapters' output is scaled by alpha / rank."""
    targets: str = option(
        ",".join(LORA_TARGETS),
        "--lora-targets",
        checks=(LORA_TARGET_NAMES,),
        stack=StackKey(
            "lora.targets", list(LORA_TARGETS), "The linear layers of every decoder layer that get LoRA adapters."
        ),
        sizing=True,
    )
    """Comma-separated names of the linear layers that get adapters (in every decoder layer)."""

    def target_list(self) -> list[str]:
        return lora_target_names(self.targets)

    def settings(self) -> dict[str, Any] | None:
        """What a checkpoint of this run holds depends on: None for full fine-tuning."""
        if not self.rank:
            return None
        return {"rank": self.rank, "alpha": self.alpha, "targets": sorted(self.target_list())}


@dataclass
class ValidationConfig:
    split: float = option(
        0.0,
        "--val-split",
        checks=(HELD_OUT_FRACTION,),
        stack=StackKey(
            "validation.split",
            doc="Hold out this fraction of job.dataset's records for validation (the trainer's --val-split), chosen "
            "by each record's index alone: the same records for any world size, never trained on. 0: none.",
        ),
    )
    """Hold out about this fraction of the data set's records (0 to 0.5) for validation: chosen by each record's
    index alone, so the same records for any world size, and never trained on. 0: no held-out split."""
    dataset: str | None = option(
        None,
        "--val-dataset",
        checks=(non_empty("leave the flag out for no such data set"),),
        rules=(ONE_HELD_OUT_SET, Across(not_the_training_records)),
        stack=StackKey(
            "validation.dataset",
            doc="A separate validation data set instead of a split, in the forms job.dataset takes (the trainer's "
            "--val-dataset).",
        ),
    )
    """A separate validation data set (same forms and --dataset-format as --dataset); instead of --val-split."""
    dataset_split: str | None = option(
        None,
        "--val-dataset-split",
        checks=(non_empty("leave the flag out to read --dataset-split's"),),
        rules=(Requires(("validation.dataset",), "{validation.dataset}, the data set it is a split of"),),
        stack=StackKey(
            "validation.datasetSplit",
            doc="With dataset, a Hugging Face data set id: the split to read (the trainer's --val-dataset-split, such "
            "as validation); default: the one job.dataset is read in (train).",
        ),
    )
    """Split of a Hugging Face --val-dataset to load (such as 'validation'); default: --dataset-split's."""
    every: int = option(
        0,
        "--eval-every",
        checks=(non_negative(" (0: only at the last step)"),),
        rules=(NEEDS_HELD_OUT,),
        stack=StackKey("validation.every"),
    )
    """Evaluate the held-out loss and perplexity every N steps and at the last step; 0: only at the last step."""
    keep_best: bool = option(
        False,
        "--keep-best",
        action="store_true",
        rules=(NEEDS_HELD_OUT,),
        stack=StackKey(
            "validation.keepBest",
            doc="Keep the checkpoint of the lowest validation loss beside the latest ones; the exported model is "
            "that one.",
        ),
    )
    """Keep the checkpoint with the lowest validation loss beside the latest ones; --export-hf exports it."""
    early_stop_patience: int = option(
        0,
        "--early-stop-patience",
        checks=(non_negative(" (0: never)"),),
        rules=(
            NEEDS_HELD_OUT,
            Requires(
                ("validation.every",),
                "{validation.every} above 0 (such as 100): with 0 the one evaluation is at the last step, with "
                "nothing left to stop",
            ),
        ),
        stack=StackKey(
            "validation.earlyStopPatience",
            doc="End training cleanly (final checkpoint and export) after this many evaluations without a lower "
            "validation loss; 0: never.",
        ),
    )
    """End training cleanly (exit 0, export done) after this many evaluations without a lower validation loss;
    0: never."""

    def held_out(self) -> bool:
        """Whether the run has a held-out set to evaluate (--val-split or --val-dataset)."""
        return bool(self.dataset) or self.split > 0

    def split_read(self, dataset_split: str) -> str:
        """The split --val-dataset is read in: --val-dataset-split, else --dataset-split's (`dataset_split`)."""
        return self.dataset_split or dataset_split

    def reads_training_records(self, data: DataConfig) -> bool:
        """Whether --val-dataset is --dataset read in the same split: the very records training reads, and the
        held-out loss a training loss (refused by the rule not_the_training_records)."""
        return self.dataset == data.dataset and self.split_read(data.dataset_split) == data.dataset_split


@dataclass
class MetricsConfig:
    file: str | None = option(None, "--metrics-file")
    """Append one JSON object per logged step to this file (rank 0 only)."""
    port: int = option(0, "--metrics-port", checks=(TCP_PORT,))
    """Serve Prometheus gauges on this port (rank 0 only); 0 turns the endpoint off."""
    host: str = option("0.0.0.0", "--metrics-host")
    """Address the Prometheus endpoint binds to."""
    log_every: int = option(10, "--log-every", checks=(positive(),))
    """Log (and write metrics) every N steps, and at the last step."""
    peak_tflops: float | None = option(None, "--peak-tflops", checks=(positive(integer=False),))
    """Peak dense TFLOP/s of one device, the denominator of MFU. Default: the CUDA device's datasheet figure
    (trainer/base/hardware/chips.py); on CPU, MFU is reported only when this is given."""


PREFLIGHT_MODES = ("on", "off")


@dataclass
class PreflightConfig:
    mode: str = option("on", "--preflight", choices=PREFLIGHT_MODES)
    """Time the collectives within each node and across nodes before the model is loaded
    (trainer/checks/fabric_preflight.py); a node below --preflight-min-fraction leaves the job (the launcher exits
    201). A world of one rank has nothing to time."""
    min_fraction: float = option(0.7, "--preflight-min-fraction")
    """A node fails when its bus bandwidth at a level is below this fraction of the median node's or of the expected
    figure."""
    buffer_bytes: int = option(0, "--preflight-bytes")
    """Bytes of each timed collective's whole buffer; 0: 256 MiB on a GPU, 1 MiB on the CPU."""
    iterations: int = option(5, "--preflight-iterations")
    """Timed iterations of each collective, after one untimed warm-up."""
    expect_intra_gb_per_s: float = option(0.0, "--preflight-expect-intra-gb-per-s")
    """Bus bandwidth (GB/s) expected within a node, from the instance type's NVLink or PCIe (the stack renders it
    from sizing/); 0: unknown, only the nodes' median is the reference."""
    expect_inter_gb_per_s: float = option(0.0, "--preflight-expect-inter-gb-per-s")
    """Bus bandwidth (GB/s) expected across nodes on one rail (a GPU's share of the node's network); 0: unknown."""


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    artifacts: ArtifactsConfig = field(default_factory=ArtifactsConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    preflight: PreflightConfig = field(default_factory=PreflightConfig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer",
        description="FSDP2 fine-tuning of Llama-shaped models; launch with torchrun for several processes.",
    )
    options.add_arguments(parser, options.options(TrainConfig))
    return parser


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse trainer arguments into a TrainConfig; argparse exits with status 2 on an unknown flag or choice."""
    return options.from_namespace(TrainConfig, build_parser().parse_args(argv))


def to_argv(config: TrainConfig) -> list[str]:
    """The command line that parses back into `config` (flags at their defaults are left out)."""
    return options.to_argv(config)


def config_problems(config: TrainConfig, facts: Facts | None = None, paths: tuple[str, ...] | None = None) -> list[str]:
    """Every declared rule of trainer/base/flags/config.py that `config` breaks, each naming the flag and the value; the
    rules that need the model's shape or the world size where `facts` gives them. `paths`: only these options'."""
    flags = options.flag_of(TrainConfig)
    return [problem.render(flags) for problem in options.option_problems(config, paths, facts)]
