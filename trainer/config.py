"""The trainer's configuration: one tree of typed dataclasses, parsed from the command line.

Torch-free on purpose: the job builder parses a manifest's trainer arguments with `parse_args` to check them
before anything is deployed. Each field's docstring is its `--help` text; each field's metadata names its flag.

    from trainer.config import parse_args
    config = parse_args(["--model", "tiny", "--steps", "10"])
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
from dataclasses import dataclass, field
from typing import Any

TORCH_FREE = True  # the stack, the job builder and the policy pack parse and render the trainer's flags

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


def _flag(name: str, **argparse_kwargs: Any) -> dict[str, Any]:
    return {"flag": name, **argparse_kwargs}


@dataclass
class ModelConfig:
    name: str = field(default="tiny", metadata=_flag("--model"))
    """Model: a preset name (tiny, small, llama2-7b, llama2-13b, llama2-70b, llama3.1-8b, llama3.1-70b,
    llama3.2-1b, llama3.2-3b, qwen2.5-7b, qwen3-8b, mistral-7b-v0.3: built from its shape and randomly initialised
    from --seed), a local directory with config.json and *.safetensors, or a Hugging Face hub id (pretrained
    weights); a Llama, Mistral, Qwen2 or Qwen3 model."""
    tokenizer: str | None = field(default=None, metadata=_flag("--tokenizer"))
    """Tokenizer: a hub id or local directory, or 'byte' for the built-in byte-level tokenizer (no download).
    Default: the model's own; 'byte' for presets without a hub checkpoint (tiny, small)."""


@dataclass
class DataConfig:
    dataset: str = field(default="synthetic", metadata=_flag("--dataset"))
    """Dataset: a local .jsonl/.json/.txt file, a Hugging Face dataset id, or 'synthetic' (deterministic
    generated text, no file needed)."""
    dataset_format: str = field(default="auto", metadata=_flag("--dataset-format", choices=DATASET_FORMATS))
    """Record format: text (a 'text' field or plain lines), instruction (alpaca-style instruction/input/output),
    dialogsum (dialogue/summary), chat ('messages': a list of {role, content} turns, rendered by the tokenizer's
    chat template; only the assistant's turns are learnt). auto picks from the first record's fields."""
    dataset_split: str = field(default="train", metadata=_flag("--dataset-split"))
    """Split to load for a Hugging Face dataset id."""
    dataset_config: str | None = field(default=None, metadata=_flag("--dataset-config"))
    """Configuration name for a Hugging Face dataset id (the second argument of datasets.load_dataset)."""
    seq_len: int = field(default=256, metadata=_flag("--seq-len"))
    """Tokens per packed training sequence; at most the model's max_position_embeddings."""
    cache_dir: str | None = field(default=None, metadata=_flag("--data-cache-dir"))
    """Directory shared by all ranks for the tokenised data set: rank 0 (or `python -m trainer.stage`) writes it
    once as memory-mapped arrays and every rank maps it. Without it, every rank tokenises the data set itself."""
    workers: int = field(default=0, metadata=_flag("--data-workers"))
    """Processes that tokenise the data set (a batch of records each at a time); 0: one per CPU the process may run
    on, at most 32."""


@dataclass
class ParallelConfig:
    sharding_strategy: str = field(
        default="FULL_SHARD", metadata=_flag("--sharding-strategy", choices=SHARDING_STRATEGIES)
    )
    """FULL_SHARD: shard parameters, gradients and optimizer state over all ranks, reshard after forward.
    SHARD_GRAD_OP: the same, but keep parameters gathered between forward and backward. HYBRID_SHARD: shard
    within a replica group, replicate across groups (2-D mesh). NO_SHARD: every rank holds everything."""
    replicate_groups: int | None = field(default=None, metadata=_flag("--replicate-groups"))
    """HYBRID_SHARD only: number of replica groups (the mesh's replicate dimension). Default: the number of nodes
    (WORLD_SIZE / LOCAL_WORLD_SIZE), so parameters are sharded within a node and replicated across nodes."""
    mixed_precision: str = field(default="bf16", metadata=_flag("--mixed-precision", choices=MIXED_PRECISIONS))
    """Compute dtype of forward/backward; parameters, gradient reduction and optimizer state stay in fp32 (with
    --lora-rank, the frozen base weights are held in this dtype and only the adapters in fp32)."""
    activation_checkpointing: str = field(
        default="none", metadata=_flag("--activation-checkpointing", choices=ACTIVATION_CHECKPOINTING)
    )
    """none; full (recompute each decoder layer in backward); selective (keep matmul and attention outputs,
    recompute the cheap elementwise operations); selective-mm (as selective, but every second matmul of a layer is
    recomputed too: torchtitan's op-level policy, less memory than selective for some recompute)."""
    all_reduce_dtype: str = field(default="fp32", metadata=_flag("--all-reduce-dtype", choices=ALL_REDUCE_DTYPES))
    """HYBRID_SHARD only: dtype of the gradients' all-reduce across replica groups (between nodes). bf16 halves its
    bytes; the reduce-scatter within a group, the sum's result and the gradients stay fp32."""
    compile: bool = field(default=False, metadata=_flag("--compile", action="store_true"))
    """torch.compile each decoder layer."""
    fp8: bool = field(default=False, metadata=_flag("--fp8", action="store_true"))
    """FP8 linear layers in the decoder blocks through torchao (CUDA GPUs of compute capability 8.9+)."""
    device: str = field(default="auto", metadata=_flag("--device", choices=DEVICES))
    """auto: cuda when available, else cpu. NCCL is used on CUDA, gloo on CPU."""
    timeout_minutes: float = field(default=10.0, metadata=_flag("--timeout-minutes"))
    """Longest a training collective waits for the other ranks; then the rank fails and torchrun restarts the
    group. Checkpoints, weight downloads and tokenisation wait under --checkpoint-timeout-minutes instead."""


@dataclass
class OptimConfig:
    lr: float = field(default=3e-4, metadata=_flag("--lr"))
    """Peak learning rate of AdamW."""
    lr_schedule: str = field(default="cosine", metadata=_flag("--lr-schedule", choices=LR_SCHEDULES))
    """Decay after warmup, from --lr down to --min-lr at the last step."""
    warmup_steps: int = field(default=0, metadata=_flag("--warmup-steps"))
    """Steps of linear warmup from lr/warmup_steps up to --lr."""
    min_lr: float | None = field(default=None, metadata=_flag("--min-lr"))
    """Learning rate at the last step for cosine and linear schedules (default 0)."""
    weight_decay: float = field(default=0.0, metadata=_flag("--weight-decay"))
    """AdamW decoupled weight decay, applied to matrices only (not to norms)."""
    grad_clip: float = field(default=1.0, metadata=_flag("--grad-clip"))
    """Clip the global gradient norm to this value; 0 turns clipping off."""


@dataclass
class ScheduleConfig:
    batch_size: int = field(default=2, metadata=_flag("--batch-size"))
    """Sequences per rank per micro step."""
    global_batch_size: int | None = field(default=None, metadata=_flag("--global-batch-size"))
    """Sequences per optimizer step, for any world size: gradient accumulation = global / (batch x ranks).
    Default: batch size x ranks. Set it explicitly when the world size may change between restarts."""
    steps: int = field(default=100, metadata=_flag("--steps"))
    """Optimizer steps to train in total (a resumed run continues up to this number)."""
    seed: int = field(default=0, metadata=_flag("--seed"))
    """Seeds the weight initialisation of presets and the order of the training samples."""


@dataclass
class CheckpointConfig:
    directory: str | None = field(default=None, metadata=_flag("--checkpoint-dir"))
    """Directory of step_<N> checkpoints (shared by all ranks). The run resumes from the newest complete one."""
    every: int = field(default=0, metadata=_flag("--checkpoint-every"))
    """Save every N steps (and after the last step); 0 saves after the last step only."""
    keep: int = field(default=3, metadata=_flag("--keep-checkpoints"))
    """Number of newest checkpoints to keep; older ones are deleted after a successful save."""
    export_hf: str | None = field(default=None, metadata=_flag("--export-hf"))
    """Write the final model to this directory in Hugging Face format (config.json, *.safetensors)."""
    export_dtype: str = field(default="bf16", metadata=_flag("--export-dtype", choices=EXPORT_DTYPES))
    """Dtype of the exported weights."""
    async_save: bool = field(default=False, metadata=_flag("--async-checkpoint", action="store_true"))
    """Write checkpoints in the background: training waits only while the state is copied to host memory; the next
    save (or the end of training) waits for the write to finish and commits it."""
    threads: int = field(default=1, metadata=_flag("--checkpoint-threads"))
    """Writer threads per rank (torch.distributed.checkpoint FileSystemWriter thread_count), each its own file."""
    stop_wait_s: float = field(default=20.0, metadata=_flag("--checkpoint-stop-wait-seconds"))
    """After SIGTERM: how long to wait for a checkpoint still being written before abandoning it (keep it below
    torchrun's --shutdown-timeout, 30 s by default)."""
    timeout_minutes: float = field(default=30.0, metadata=_flag("--checkpoint-timeout-minutes"))
    """Longest wait for a checkpoint save or load, a weight download or the tokenisation of the data set by another
    rank (a process group of its own, so that training keeps the shorter --timeout-minutes)."""


@dataclass
class ArtifactsConfig:
    uri: str | None = field(default=None, metadata=_flag("--artifacts-uri"))
    """s3:// prefix of this run's durable artifacts: checkpoints (the durable tier, <uri>/checkpoints/step_<N>, written
    with the S3 connector for PyTorch beside the fast tier in --checkpoint-dir) and the final model in Hugging Face
    format (<uri>/model, uploaded after --export-hf)."""
    checkpoint_every: int = field(default=0, metadata=_flag("--s3-checkpoint-every"))
    """With --artifacts-uri: write every Nth step's checkpoint to S3 as well (a multiple of --checkpoint-every), and
    always the last step's; 0: every checkpoint."""
    resume_from: str | None = field(default=None, metadata=_flag("--resume-from"))
    """s3:// URI to start from when --checkpoint-dir holds no checkpoint: a step_<N> checkpoint, or a directory of
    them (the newest complete one). Any world size and sharding strategy."""


@dataclass
class LoraConfig:
    rank: int = field(default=0, metadata=_flag("--lora-rank"))
    """LoRA rank r: train low-rank adapters (PEFT) beside frozen base weights kept in the compute dtype; 0 is full
    fine-tuning."""
    alpha: int = field(default=32, metadata=_flag("--lora-alpha"))
    """LoRA alpha (an integer, as peft.LoraConfig takes it): the adapters' output is scaled by alpha / rank."""
    targets: str = field(default=",".join(LORA_TARGETS), metadata=_flag("--lora-targets"))
    """Comma-separated names of the linear layers that get adapters (in every decoder layer)."""

    def target_list(self) -> list[str]:
        return [name.strip() for name in self.targets.split(",") if name.strip()]

    def settings(self) -> dict[str, Any] | None:
        """What a checkpoint of this run holds depends on: None for full fine-tuning."""
        if not self.rank:
            return None
        return {"rank": self.rank, "alpha": self.alpha, "targets": sorted(self.target_list())}


@dataclass
class ValidationConfig:
    split: float = field(default=0.0, metadata=_flag("--val-split"))
    """Hold out about this fraction of the data set's records (0 to 0.5) for validation: chosen by each record's
    index alone, so the same records for any world size, and never trained on. 0: no held-out split."""
    dataset: str | None = field(default=None, metadata=_flag("--val-dataset"))
    """A separate validation data set (same forms and --dataset-format as --dataset); instead of --val-split."""
    dataset_split: str | None = field(default=None, metadata=_flag("--val-dataset-split"))
    """Split of a Hugging Face --val-dataset to load (such as 'validation'); default: --dataset-split's."""
    every: int = field(default=0, metadata=_flag("--eval-every"))
    """Evaluate the held-out loss and perplexity every N steps and at the last step; 0: only at the last step."""
    keep_best: bool = field(default=False, metadata=_flag("--keep-best", action="store_true"))
    """Keep the checkpoint with the lowest validation loss beside the latest ones; --export-hf exports it."""
    early_stop_patience: int = field(default=0, metadata=_flag("--early-stop-patience"))
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
        held-out loss a training loss (refused by trainer/validate.py and the stack's preview alike)."""
        return self.dataset == data.dataset and self.split_read(data.dataset_split) == data.dataset_split


@dataclass
class MetricsConfig:
    file: str | None = field(default=None, metadata=_flag("--metrics-file"))
    """Append one JSON object per logged step to this file (rank 0 only)."""
    port: int = field(default=0, metadata=_flag("--metrics-port"))
    """Serve Prometheus gauges on this port (rank 0 only); 0 turns the endpoint off."""
    host: str = field(default="0.0.0.0", metadata=_flag("--metrics-host"))
    """Address the Prometheus endpoint binds to."""
    log_every: int = field(default=10, metadata=_flag("--log-every"))
    """Log (and write metrics) every N steps, and at the last step."""
    peak_tflops: float | None = field(default=None, metadata=_flag("--peak-tflops"))
    """Peak dense TFLOP/s of one device, the denominator of MFU. Default: the CUDA device's datasheet figure
    (trainer/hardware.py); on CPU, MFU is reported only when this is given."""


PREFLIGHT_MODES = ("on", "off")


@dataclass
class PreflightConfig:
    mode: str = field(default="on", metadata=_flag("--preflight", choices=PREFLIGHT_MODES))
    """Time the collectives within each node and across nodes before the model is loaded (trainer/preflight.py); a
    node below --preflight-min-fraction leaves the job (the launcher exits 201). A world of one rank has nothing to
    time."""
    min_fraction: float = field(default=0.7, metadata=_flag("--preflight-min-fraction"))
    """A node fails when its bus bandwidth at a level is below this fraction of the median node's or of the expected
    figure."""
    buffer_bytes: int = field(default=0, metadata=_flag("--preflight-bytes"))
    """Bytes of each timed collective's whole buffer; 0: 256 MiB on a GPU, 1 MiB on the CPU."""
    iterations: int = field(default=5, metadata=_flag("--preflight-iterations"))
    """Timed iterations of each collective, after one untimed warm-up."""
    expect_intra_gb_per_s: float = field(default=0.0, metadata=_flag("--preflight-expect-intra-gb-per-s"))
    """Bus bandwidth (GB/s) expected within a node, from the instance type's NVLink or PCIe (the stack renders it
    from sizing/); 0: unknown, only the nodes' median is the reference."""
    expect_inter_gb_per_s: float = field(default=0.0, metadata=_flag("--preflight-expect-inter-gb-per-s"))
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


def field_docstrings(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass (Python keeps these only in the source)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        is_doc = isinstance(following, ast.Expr) and isinstance(getattr(following, "value", None), ast.Constant)
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and is_doc:
            docs[statement.target.id] = " ".join(str(following.value.value).split())  # type: ignore[attr-defined]
    return docs


def _sections() -> list[tuple[str, type]]:
    return [
        (f.name, f.type if isinstance(f.type, type) else globals()[f.type]) for f in dataclasses.fields(TrainConfig)
    ]


def _value_type(annotation: str) -> type:
    for name, kind in (("int", int), ("float", float)):
        if annotation.startswith(name):
            return kind
    return str


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m trainer",
        description="FSDP2 fine-tuning of Llama-shaped models; launch with torchrun for several processes.",
    )
    for section, cls in _sections():
        group = parser.add_argument_group(section)
        docs = field_docstrings(cls)
        for f in dataclasses.fields(cls):
            kwargs = {k: v for k, v in f.metadata.items() if k != "flag"}
            if kwargs.get("action") != "store_true":
                kwargs.setdefault("type", _value_type(str(f.type)))
            if "choices" not in kwargs and kwargs.get("action") != "store_true":
                kwargs["metavar"] = f.metadata["flag"].lstrip("-").replace("-", "_").upper()
            default = f.default
            help_text = docs[f.name] + ("" if default in (None, False) else f" (default: {default})")
            group.add_argument(
                f.metadata["flag"], dest=f"{section}.{f.name}", default=default, help=help_text, **kwargs
            )
    return parser


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse trainer arguments into a TrainConfig; argparse exits with status 2 on an unknown flag or choice."""
    namespace = vars(build_parser().parse_args(argv))
    sections = {}
    for section, cls in _sections():
        values = {f.name: namespace[f"{section}.{f.name}"] for f in dataclasses.fields(cls)}
        sections[section] = cls(**values)
    return TrainConfig(**sections)


def to_argv(config: TrainConfig) -> list[str]:
    """The command line that parses back into `config` (flags at their defaults are left out)."""
    argv: list[str] = []
    for section, cls in _sections():
        for f in dataclasses.fields(cls):
            value = getattr(getattr(config, section), f.name)
            if value == f.default:
                continue
            if f.metadata.get("action") == "store_true":
                argv.append(f.metadata["flag"])
            else:
                argv += [f.metadata["flag"], str(value)]
    return argv
