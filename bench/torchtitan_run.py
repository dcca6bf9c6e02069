"""torchtitan's own Trainer on the benchmark's work; run by bench/vs_torchtitan.py and bench/gpu_mfu.py in
torchtitan's environment (bench/torchtitan_setup.py).

    bench/.torchtitan-venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
        bench/torchtitan_run.py --warmup 5 --steps 10 --result /tmp/titan.json

What decides the work is torchtitan's as it ships: its Llama 3 model code (fused qkv, complex RoPE), its FSDP2
wrapping, its train step, its AdamW (`--optimizer`: its default fused, or foreach) and its loss (`--loss`: the
chunked cross-entropy of its Llama 3 configs, or its plain CrossEntropyLoss), with the shape, batch, dtypes and
optimizer numbers set to ours. Three things are ours, because the wheel lacks them or they do not run on CPU: the
model shape (the `small` preset's numbers by default), SDPA as the attention (the wheel's language-model configs
offer flex and varlen attention only; SDPA is what our trainer runs, and torchtitan's own ScaledDotProductAttention
module runs it), and a data loader of seeded random token ids (the same tokens per step; their values do not
change the work), with a stand-in tokenizer that only reports the vocabulary size. Parallelism: FSDP over every
rank with torchtitan's partial_dtensor backend; its default spmd_types backend fails in fully_shard with torch
2.13 ("all parameters must be DTensors on the full SPMD mesh"). Timing starts at the end of the last warmup step;
with --interval, also the mean step time of each interval of that many timed steps (the figures our trainer's
metrics file gives); peak memory is the busiest rank's VmHWM on CPU, torch.cuda.max_memory_allocated on a GPU.

It imports only torchtitan, torch, the standard library and bench/gpu_rows.py (torch and the standard library): it
runs in torchtitan's environment, not ours.
"""

# torchtitan is installed in its own environment (bench/torchtitan_setup.py), not in the one the type checker reads.
# pyright: reportMissingImports=false

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.gpu_rows import peak_memory_bytes

# The default shape: the `small` preset (trainer/base/model/presets.py), the work of bench/vs_torchtitan.py.
SMALL = {"vocab": 32000, "dim": 768, "ffn_dim": 2048, "layers": 8, "heads": 12, "kv_heads": 12}


def bench_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="torchtitan's Trainer on the benchmark's work")
    for name, value in SMALL.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value, help="model shape")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="compute dtype")
    parser.add_argument("--compile", action="store_true", help="torchtitan's torch.compile of model and loss")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2, help="sequences per rank per step")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="timed steps after the warmup")
    parser.add_argument("--interval", type=int, default=0, help="also time the timed steps in intervals of this many")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--loss", default="chunked", choices=("chunked", "plain"),
                        help="chunked: lm_head and cross-entropy in 8 chunks (torchtitan's Llama 3 configs); plain: "
                        "one cross-entropy over the full logits (torchtitan's CrossEntropyLoss alone)")  # fmt: skip
    parser.add_argument(
        "--optimizer",
        default="fused",
        choices=("fused", "foreach", "for-loop"),
        help="torchtitan's optimizer implementation (its default: fused)",
    )
    parser.add_argument("--profile", action="store_true", help="print rank 0's torch.profiler table of the timed steps")
    parser.add_argument("--result", required=True, help="JSON file rank 0 writes the figures to")
    return parser.parse_args()


def build_config(args: argparse.Namespace, dump_folder: str):
    from torchtitan.components.checkpoint import CheckpointManager
    from torchtitan.components.dataloader import BaseDataLoader
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
    from torchtitan.components.metrics import MetricsProcessor
    from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
    from torchtitan.components.tokenizer import BaseTokenizer
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.common.attention import ScaledDotProductAttention
    from torchtitan.models.llama3 import _build_llama3_layers, model_registry
    from torchtitan.models.llama3.model import Llama3Model
    from torchtitan.trainer import Trainer

    class VocabOnlyTokenizer(BaseTokenizer):
        """Reports the vocabulary size; the random-token loader never asks it to encode text."""

        @dataclass(kw_only=True, slots=True)
        class Config(BaseTokenizer.Config):
            vocab_size: int = SMALL["vocab"]

        def __init__(self, config: Config, **_: object) -> None:
            super().__init__()
            self.vocab_size = config.vocab_size

        def encode(self, *args: object, **kwargs: object) -> list[int]:
            raise NotImplementedError("the benchmark feeds token ids")

        def decode(self, *args: object, **kwargs: object) -> str:
            raise NotImplementedError("the benchmark feeds token ids")

        def get_vocab_size(self) -> int:
            return self.vocab_size

    class RandomTokens(BaseDataLoader):
        """`local_batch_size` x `seq_len` token ids per step from a generator seeded by the rank (ids below 256,
        as the byte tokenizer's), labels shifted by one."""

        @dataclass(kw_only=True, slots=True)
        class Config(BaseDataLoader.Config):
            pass

        def __init__(self, config: Config, *, dp_rank: int, seq_len: int, local_batch_size: int, **_: object):
            self.vocab = vocab
            self.generator = torch.Generator().manual_seed(1000 + dp_rank)
            self.shape = (local_batch_size, seq_len + 1)

        def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
            while True:
                tokens = torch.randint(0, min(256, self.vocab), self.shape, generator=self.generator)
                yield {"input": tokens[:, :-1].contiguous()}, tokens[:, 1:].contiguous()

        def state_dict(self) -> dict:
            return {}

        def load_state_dict(self, state_dict: dict) -> None:
            pass

    spec = model_registry("debugmodel", attn_backend="flex")
    dim, vocab = args.dim, args.vocab
    layers = _build_llama3_layers(
        fuse_qkv=True,
        n_layers=args.layers,
        dim=dim,
        n_heads=args.heads,
        n_kv_heads=args.kv_heads,
        hidden_dim=args.ffn_dim,
        rope=ComplexRoPE.Config(dim=dim // args.heads, max_seq_len=max(2048, args.seq_len), theta=10000.0),
        attn_backend="flex",
    )
    for layer in layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    spec.model = Llama3Model.Config(
        dim=dim,
        vocab_size=vocab,
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim),
        norm=RMSNorm.Config(normalized_shape=dim),
        lm_head=Linear.Config(in_features=dim, out_features=vocab),
        layers=layers,
    )
    spec.flavor = f"{args.layers} layers of dim {dim}"
    loss = CrossEntropyLoss.Config(global_vocab_size=vocab)
    if args.loss == "chunked":
        loss = ChunkedLossWrapper.Config(loss_fn=loss)
    optimizer = default_adamw(lr=args.lr, weight_decay=args.weight_decay)
    optimizer.implementation = args.optimizer
    return Trainer.Config(
        model_spec=spec,
        dump_folder=dump_folder,
        tokenizer=VocabOnlyTokenizer.Config(vocab_size=vocab),
        dataloader=RandomTokens.Config(),
        loss=loss,
        optimizer=optimizer,
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=1, decay_type="linear", min_lr_factor=0.0),
        training=TrainingConfig(
            local_batch_size=args.batch_size,
            seq_len=args.seq_len,
            steps=args.warmup + args.steps,
            max_norm=args.grad_clip,
            dtype="float32",  # parameters and optimizer in fp32, as ours; compute in --dtype
            mixed_precision_param=args.dtype,
            disable_cuda_graphs=True,
        ),
        parallelism=ParallelismConfig(spmd_backend="partial_dtensor"),
        metrics=MetricsProcessor.Config(log_freq=args.warmup),
        checkpoint=CheckpointManager.Config(enable=False),
        activation_checkpoint=None,
        compile=CompileConfig(enable=args.compile),
    )


def main() -> None:
    args = bench_args()
    dump_folder = os.environ.get("TMPDIR", "/tmp") + f"/torchtitan-bench-{os.getpid()}"
    config = build_config(args, dump_folder)
    trainer = config.build()
    step_ends: list[float] = []
    step_cpu_ends: list[float] = []
    inner_step = trainer.train_step
    profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])

    def timed_step(data_iterator: Iterator) -> None:
        if args.profile and len(step_ends) == args.warmup:
            profiler.start()
        with torch.profiler.record_function("train_step"):
            inner_step(data_iterator)
        step_ends.append(time.perf_counter())
        step_cpu_ends.append(time.process_time())
        if args.profile and len(step_ends) == args.warmup + args.steps:
            profiler.stop()

    trainer.train_step = timed_step
    try:
        trainer.train()
    finally:
        trainer.close()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    peak = torch.tensor([peak_memory_bytes(device)], dtype=torch.int64, device=device)
    torch.distributed.all_reduce(peak, op=torch.distributed.ReduceOp.MAX)
    world = torch.distributed.get_world_size()
    torch.distributed.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        start = args.warmup - 1  # the end of the last warmup step starts the clock
        seconds = (step_ends[-1] - step_ends[start]) / args.steps
        cpu_seconds = (step_cpu_ends[-1] - step_cpu_ends[start]) / args.steps
        tokens_per_step = args.batch_size * args.seq_len * world
        every = args.interval or args.steps
        ends = range(start, start + args.steps + 1, every)  # indices of the steps whose ends bound the intervals
        result = {
            "tokens_per_second": tokens_per_step / seconds,
            "tokens_per_cpu_second": tokens_per_step / cpu_seconds,
            "peak_memory_bytes": int(peak[0]),
            "interval_step_seconds": [(step_ends[b] - step_ends[a]) / every for a, b in itertools.pairwise(ends)],
            "interval_step_cpu_seconds": [
                (step_cpu_ends[b] - step_cpu_ends[a]) / every for a, b in itertools.pairwise(ends)
            ],
        }
        Path(args.result).write_text(json.dumps(result))
        if args.profile:
            print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))


if __name__ == "__main__":
    main()
