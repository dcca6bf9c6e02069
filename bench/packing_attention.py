"""Records packed apart (the trainer's blocks: positions per record, attention within each) against the stream cut
into blocks under plain causal attention, on CPU: a training step's tokens/s, same model, same records.

    .venv/bin/python bench/packing_attention.py                     # small (106M), seq 512, 5 rounds
    .venv/bin/python bench/packing_attention.py --model tiny --rounds 1 --steps 2   # quick check

Both sides train the same model (built as the trainer builds it, one process, fp32) on blocks of --seq-len
positions from the same data set (--dataset, the byte tokenizer): "apart" takes the trainer's own blocks
(trainer/data/blocks.py) through the trainer's loss with its attention mask (trainer/model/attention.py, the CPU
path: SDPA with a boolean mask); "causal" cuts the token stream every --seq-len tokens, as the trainer did before
records were kept apart, and runs SDPA with is_causal over each block. A round times --steps forward and backward
steps of each after one untimed step, the order alternating between rounds, so both sides see the same machine; the
figure is the median over rounds of the per-round ratio. Throughputs per side: positions per second of wall time and
of process CPU time (all threads; far steadier on a shared machine), and record tokens per CPU-second (positions that
hold a record: apart's blocks end in padding, causal's hold none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from trainer.base.flags.config import DataConfig  # noqa: E402
from trainer.base.model.presets import PRESETS  # noqa: E402
from trainer.base.model.source import resolve_model  # noqa: E402
from trainer.data.packed import IGNORE_INDEX, PackedData, stack  # noqa: E402
from trainer.data.packing import build_packed_data  # noqa: E402
from trainer.data.tokenizer_bytes import ByteTokenizer  # noqa: E402
from trainer.evaluation import summed_token_loss  # noqa: E402
from trainer.model.build import build_meta_model, hf_config, init_buffers, init_weights  # noqa: E402
from trainer.model.loss import labels_for_loss, use_chunked_loss  # noqa: E402

APART, CAUSAL = "apart", "causal"


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="small", choices=PRESETS, help="preset (default: small, 106M parameters)")
    parser.add_argument("--dataset", default="synthetic", help="records to pack (default: synthetic)")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=2, help="blocks per step")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per side per round")
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Side:
    name: str
    step: Callable[[int], None]
    """One forward and backward over step i's blocks."""
    record_share: float
    """Share of the positions that hold a record."""


def stream_blocks(data: PackedData, index: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks [index, index + count) of the stream cut every seq_len tokens (inputs, next-token labels)."""
    length = data.seq_len
    rows = [data.tokens[(index + row) * length : (index + row + 1) * length + 1] for row in range(count)]
    tokens = torch.from_numpy(np.stack(rows).astype(np.int64))
    trained = torch.from_numpy(np.stack([data.trainable[(index + r) * length + 1 : (index + r + 1) * length + 1]
                                         for r in range(count)]))  # fmt: skip
    return tokens[:, :-1], torch.where(trained, tokens[:, 1:], IGNORE_INDEX)


def sides(model: torch.nn.Module, data: PackedData, batch: int) -> list[Side]:
    stream_count = (len(data.tokens) - 1) // data.seq_len

    def apart(step: int) -> None:
        first = (step * batch) % (data.num_samples - batch + 1)
        inputs, labels, positions = (torch.from_numpy(a) for a in stack([data.sample(first + r) for r in range(batch)]))
        summed_token_loss(model, inputs, labels, positions).backward()

    def causal(step: int) -> None:
        inputs, labels = stream_blocks(data, (step * batch) % (stream_count - batch + 1), batch)
        with labels_for_loss(model, labels):
            model(input_ids=inputs).logits.backward()

    filled = data.blocks.filled() / (data.num_samples * data.seq_len)
    return [Side(APART, apart, filled), Side(CAUSAL, causal, 1.0)]


def timed(side: Side, first_step: int, steps: int) -> tuple[float, float]:
    """Wall and process CPU seconds per step over `steps` steps after an untimed one."""
    side.step(first_step)
    wall, cpu = time.perf_counter(), time.process_time()
    for step in range(first_step + 1, first_step + 1 + steps):
        side.step(step)
    return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    torch.manual_seed(0)
    source = resolve_model(args.model)
    model = build_meta_model(hf_config(source))
    model.to_empty(device="cpu")
    init_buffers(model, torch.device("cpu"))
    init_weights(model, seed=0, std=0.02)
    use_chunked_loss(model)  # as trainer/train.py: both sides take the loss through the same output layer
    data = build_packed_data(DataConfig(dataset=args.dataset, seq_len=args.seq_len), ByteTokenizer())
    both = sides(model, data, args.batch_size)
    positions = args.batch_size * args.seq_len
    seconds: dict[str, list[tuple[float, float]]] = {side.name: [] for side in both}
    for round_index in range(args.rounds):
        order = both if round_index % 2 == 0 else both[::-1]
        for side in order:
            seconds[side.name].append(timed(side, round_index * (args.steps + 1), args.steps))
        figures = ", ".join(f"{side.name} {positions / seconds[side.name][-1][0]:.1f} positions/s" for side in both)
        print(f"round {round_index + 1}: {figures}", flush=True)
    print(report(args, both, seconds, data))


def row(name: str, values: list[float], digits: int) -> str:
    median = statistics.median(values)
    return f"| {name} | " + " | ".join(f"{v:.{digits}f}" for v in values) + f" | {median:.{digits}f} |"


def report(
    args: argparse.Namespace, both: list[Side], seconds: dict[str, list[tuple[float, float]]], data: PackedData
) -> str:
    positions = args.batch_size * args.seq_len
    share = {side.name: side.record_share for side in both}
    wall = {name: [positions / s[0] for s in values] for name, values in seconds.items()}
    cpu = {name: [positions / s[1] for s in values] for name, values in seconds.items()}
    useful = {name: [v * share[name] for v in values] for name, values in cpu.items()}

    def ratios(figures: dict[str, list[float]]) -> list[float]:
        return [a / c for a, c in zip(figures[APART], figures[CAUSAL], strict=True)]

    rounds = len(seconds[APART])
    lines = [
        f"\n{args.model} preset, fp32, 1 process on CPU, {args.dataset} ({len(data.record_lengths)} records, byte "
        f"tokens), seq {args.seq_len}, batch {args.batch_size}; {args.steps} timed steps per side per round; apart: "
        f"{data.num_samples} blocks, {100 * share[APART]:.1f}% of positions hold a record",
        "",
        "| | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " | median |",
        "|---|" + "---:|" * (rounds + 1),
        row("apart, positions/s", wall[APART], 1),
        row("causal, positions/s", wall[CAUSAL], 1),
        row("apart / causal (wall)", ratios(wall), 3),
        row("apart, positions per CPU-second", cpu[APART], 1),
        row("causal, positions per CPU-second", cpu[CAUSAL], 1),
        row("apart / causal (CPU time)", ratios(cpu), 3),
        row("apart / causal (record tokens per CPU-second)", ratios(useful), 3),
        "",
        f"apart / causal, median of {rounds} rounds: {statistics.median(ratios(wall)):.3f} in wall time, "
        f"{statistics.median(ratios(cpu)):.3f} in CPU time, {statistics.median(ratios(useful)):.3f} in record tokens "
        "per CPU-second",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
