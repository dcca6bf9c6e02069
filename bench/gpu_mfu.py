"""The prepared GPU command: our trainer against torchtitan on one GPU, same torch, same machine, one run.

    python3 bench/gpu_mfu.py --out "$OUT"                    # on the lent H200, bench/.wheels carried (<= 8 minutes)
    python bench/carried_torchtitan.py                       # here, first: the wheels it installs there
    python bench/gpu_mfu.py --dry-run --out /tmp/gpu-mfu     # the same logic on the CPU with the tiny shape

The work: a Llama 3.1 8B-shaped decoder cut to the most layers (16 down to 12) that fit the GPU without activation
checkpointing by the sizing model (sizing/memory.py), seq 4096, batch 2, bf16 compute with fp32 master weights and
AdamW, FSDP2 on the one GPU, SDPA's flash kernel alone enabled (bench/gpu_rows.py pin_flash_attention): torchtitan's
attention is SDPA; ours is the trainer's own, flex attention over each block's records on a GPU, fed one record per
block so that both do causal attention over 4096 positions (bench/gpu_ours_row.py one_long_record). What ran is read
from each row's profiled step (operators and GPU kernels) and printed. Four rows: ours eager, torchtitan eager, ours
compiled, torchtitan compiled (torchtitan 0.2.2, the release that runs on torch 2.11, carried as a wheel and installed
without dependencies over the machine's torch; bench/carried_torchtitan.py). Each row is a process of its own: warm-up
steps (compilation), then timed windows, each closed when the GPU has finished. Rounds run the rows in that order and
then reversed, as many rounds as the time budget allows (the first always), so the rows interleave; each row's figure is
the median over all its windows, with their spread. FLOPs per token are 6 x the model's own parameters in matmuls
(counted in the built model, the input embedding left out) + 12 L H T; MFU divides by the chip's dense bf16 peak
(trainer/base/hardware/chips.py) and, beside it, by the bf16 matmul rate measured on the machine. Versions, clocks (read
every 2 s per row by nvidia-smi, never set) and every figure go to $OUT/gpu_mfu.json, the table to $OUT/gpu_mfu.md, each
row's output to $OUT/rows.log. Nothing is downloaded: pip installs the carried wheels with --no-index.

The goal it judges (printed last): ours compiled at least torchtitan compiled in tokens/s, and at least 45% MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from bench.carried_torchtitan import TORCHTITAN, WHEELS, install  # noqa: E402
from bench.gpu_machine import ClockSampler, driver, now  # noqa: E402
from bench.gpu_rows import RowResult, Work  # noqa: E402
from sizing.memory import Job, Ranks, peak_memory  # noqa: E402
from trainer.base.hardware.chips import PEAK_BF16_FLOPS, chip_for_device_name  # noqa: E402
from trainer.base.model.presets import PRESETS  # noqa: E402
from trainer.base.units import GIB  # noqa: E402

GOAL_MFU = 0.45
LAYER_CHOICES = (16, 15, 14, 13, 12)
ROWS = (("ours", False), ("torchtitan", False), ("ours", True), ("torchtitan", True))
HEADROOM = 1.1  # the sizing model's allocator headroom, plus its 2 GiB of runtime (docs/sizing.md "Fits")


@dataclass(frozen=True)
class RowRun:
    trainer: str
    compile: bool
    round: int
    seconds: float
    result: RowResult | None
    failure: str | None = None

    @property
    def label(self) -> str:
        return f"{self.trainer} {'compiled' if self.compile else 'eager'}"


def bench_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out/gpu-mfu")))
    parser.add_argument("--budget-s", type=float, default=None,
                        help="seconds for all rows together (default: 430 on a GPU, 1800 on a dry run)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="most rounds (the budget may allow fewer)")
    parser.add_argument("--layers", type=int, default=None, help="default: the most of 16..12 that fit")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--window-steps", type=int, default=5)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--wheels", type=Path, default=WHEELS, help="the carried wheels")
    parser.add_argument("--dry-run", action="store_true", help="the tiny shape on the CPU, a few short windows")
    return parser.parse_args(argv)


def fitting_layers(gpu_memory_bytes: int, seq_len: int, batch_size: int) -> tuple[int, float]:
    """The most layers of LAYER_CHOICES whose peak, by the sizing model, fits with its headroom; and that peak."""
    for layers in LAYER_CHOICES:
        shape = replace(PRESETS["llama3.1-8b"], num_layers=layers)
        peak = peak_memory(Job(shape, seq_len, batch_size, "FULL_SHARD", "bf16", "none"), Ranks(1, 1)).total
        if peak * HEADROOM + 2 * GIB <= gpu_memory_bytes:
            return layers, peak
    raise SystemExit(f"not even {LAYER_CHOICES[-1]} layers fit {gpu_memory_bytes / GIB:.0f} GiB")


def work_for(args: argparse.Namespace, layers: int, compiled: bool) -> Work:
    if args.dry_run:
        return Work(layers=PRESETS["tiny"].num_layers, seq_len=64, batch_size=2, warmup_steps=2, window_steps=2,
                    windows=2, compile=compiled, device="cpu")  # fmt: skip
    return Work(layers=layers, seq_len=args.seq_len, batch_size=args.batch_size, warmup_steps=args.warmup_steps,
                window_steps=args.window_steps, windows=args.windows, compile=compiled, device="cuda")  # fmt: skip


def row_command(trainer: str, work: Work, result: Path) -> list[str]:
    row = [*work.to_argv(), "--result", str(result)]
    if trainer == "ours":
        return [sys.executable, str(ROOT / "bench" / "gpu_ours_row.py"), *row]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
            str(ROOT / "bench" / "gpu_titan_row.py"), *row]  # fmt: skip


def run_row(trainer: str, work: Work, round_: int, site: Path, log: Path, timeout: float) -> RowRun:
    """One row in a process of its own, its output appended to `log`; a failure or a timeout is a row saying so."""
    with tempfile.TemporaryDirectory() as scratch:
        result = Path(scratch) / "row.json"
        paths = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1"}
        started = time.perf_counter()
        with log.open("a") as output:
            output.write(f"\n===== round {round_}: {trainer} compile={work.compile} ({now()}) =====\n")
            output.flush()
            try:
                done = subprocess.run(row_command(trainer, work, result), cwd=ROOT, env=env, stdout=output,
                                      stderr=subprocess.STDOUT, timeout=max(1.0, timeout), check=False)  # fmt: skip
                failure = None if done.returncode == 0 and result.exists() else f"exit {done.returncode}"
            except subprocess.TimeoutExpired:
                failure = f"stopped at the time budget ({timeout:.0f} s)"
        seconds = time.perf_counter() - started
        return RowRun(trainer, work.compile, round_, seconds, None if failure else RowResult.read(result), failure)


def rounds(args: argparse.Namespace, layers: int, site: Path, sampler: ClockSampler) -> list[RowRun]:
    """Round 0 always; each next one, its order reversed, only if the rows' last durations fit what is left."""
    runs: list[RowRun] = []
    deadline = time.perf_counter() + args.budget_s
    last: dict[tuple[str, bool], float] = {}
    log = args.out / "rows.log"
    for round_ in range(args.rounds):
        order = ROWS if round_ % 2 == 0 else tuple(reversed(ROWS))
        if round_ and sum(last.values()) > deadline - time.perf_counter():
            break
        for trainer, compiled in order:
            sampler.row = f"{trainer} {'compiled' if compiled else 'eager'}"
            work = work_for(args, layers, compiled)
            run = run_row(trainer, work, round_, site, log, deadline - time.perf_counter())
            sampler.row = ""
            last[(trainer, compiled)] = run.seconds
            runs.append(run)
            print(f"round {round_} {run.label}: {run.failure or 'done'} in {run.seconds:.0f} s", flush=True)
    return runs


def window_speeds(result: RowResult) -> list[float]:
    """Tokens per second of each timed window."""
    return [result.tokens_per_step * result.window_steps / seconds for seconds in result.window_seconds]


def row_summary(label: str, runs: list[RowRun], peak_flops: float | None, matmul_tflops: float | None,
                sampler: ClockSampler) -> dict:  # fmt: skip
    """Median and spread of every timed window of the row's runs, MFU, memory, attention, clocks."""
    done = [run for run in runs if run.label == label and run.result]
    speeds = [speed for run in done if run.result for speed in window_speeds(run.result)]
    first = done[0].result if done and done[0].result else None
    mine = [run for run in runs if run.label == label]
    failures = [f"round {run.round}: {run.failure}" for run in mine if run.failure]
    summary: dict = {"row": label, "runs": len(mine), "windows": len(speeds), "failures": failures}
    if not speeds or first is None:
        return summary
    median = statistics.median(speeds)
    flops = first.flops_per_token
    summary |= {
        "tokens_per_second": median,
        "min": min(speeds),
        "max": max(speeds),
        "spread": (max(speeds) - min(speeds)) / median,
        "round_medians": [statistics.median(window_speeds(run.result)) for run in done if run.result],
        "flops_per_token": flops,
        "parameters": first.parameters,
        "matmul_parameters": first.matmul_parameters,
        "mfu": median * flops / peak_flops if peak_flops else None,
        "mfu_of_measured_matmul": median * flops / (matmul_tflops * 1e12) if matmul_tflops else None,
        "peak_memory_bytes": max(r.result.peak_memory_bytes for r in done if r.result),
        "attention": first.attention,
        "clocks": sampler.summary(label),
    }
    return summary


def verdict(rows: dict[str, dict], dry_run: bool) -> list[str]:
    """The goal's two conditions, each with its figures."""
    ours, theirs = rows.get("ours compiled", {}), rows.get("torchtitan compiled", {})
    lines = []
    for mode in ("eager", "compiled"):
        a = rows.get(f"ours {mode}", {}).get("tokens_per_second")
        b = rows.get(f"torchtitan {mode}", {}).get("tokens_per_second")
        lines.append(f"ours / torchtitan, {mode}: " + (f"{a / b:.3f}x" if a and b else "not measured"))
    judged = "" if not dry_run else " (dry run on the CPU: not a judgement)"
    if ours.get("tokens_per_second") and theirs.get("tokens_per_second"):
        ratio = ours["tokens_per_second"] / theirs["tokens_per_second"]
        lines.append(f"goal 1, ours compiled >= torchtitan compiled: {ratio:.3f}x -> "
                     f"{'MET' if ratio >= 1 else 'NOT MET'}{judged}")  # fmt: skip
    else:
        lines.append("goal 1, ours compiled >= torchtitan compiled: not measured (a compiled row failed)")
    mfu = ours.get("mfu")
    if mfu is None:
        lines.append(f"goal 2, ours compiled MFU >= {GOAL_MFU:.0%}: not measured (no known GPU peak, or no row)")
    else:
        met = "MET" if mfu >= GOAL_MFU else "NOT MET"
        lines.append(f"goal 2, ours compiled MFU >= {GOAL_MFU:.0%}: {mfu:.1%} -> {met}{judged}")
    return lines


def percent(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction:.1%}"


def table(rows: dict[str, dict]) -> list[str]:
    lines = ["| row | tokens/s (median) | spread (min-max) | windows | MFU | MFU of measured matmul | peak GiB | "
             "SM clock MHz | attention |", "|---|---:|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for label, row in rows.items():
        speed = row.get("tokens_per_second")
        if speed is None:
            lines.append(f"| {label} | failed: {'; '.join(row['failures']) or 'no window'} | | 0 | | | | | |")
            continue
        cells = [
            label,
            f"{speed:,.0f}",
            f"{row['min']:,.0f}-{row['max']:,.0f} ({row['spread']:.1%})",
            str(row["windows"]),
            percent(row["mfu"]),
            percent(row["mfu_of_measured_matmul"]),
            f"{row['peak_memory_bytes'] / GIB:.1f}",
            "n/a" if not row["clocks"] else f"{row['clocks']['sm_clock_mhz']:.0f}",
            row["attention"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    args = bench_args(argv)
    args.budget_s = args.budget_s or (1800 if args.dry_run else 430)
    args.out.mkdir(parents=True, exist_ok=True)
    started = now()
    machine = json.loads(subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_machine.py")], cwd=ROOT,
                                        capture_output=True, text=True, check=True).stdout)  # fmt: skip
    software, matmul = machine["software"], machine["matmul_bf16_tflops"]
    if not args.dry_run and "gpu" not in software:
        raise SystemExit("no CUDA device here: --dry-run runs the same logic on the CPU")
    chip = chip_for_device_name(software.get("gpu", ""))
    peak_flops = PEAK_BF16_FLOPS.get(chip) if chip else None
    if args.dry_run:
        layers, predicted = PRESETS["tiny"].num_layers, None
    elif args.layers:
        layers, predicted = args.layers, None
    else:
        layers, predicted = fitting_layers(int(software["gpu_memory_bytes"]), args.seq_len, args.batch_size)
    with tempfile.TemporaryDirectory() as site:
        install(Path(site), args.wheels)
        sampler = ClockSampler().start()
        try:
            runs = rounds(args, layers, Path(site), sampler)
        finally:
            sampler.stop()
    labels = [f"{trainer} {'compiled' if compiled else 'eager'}" for trainer, compiled in ROWS]
    rows = {label: row_summary(label, runs, peak_flops, matmul, sampler) for label in labels}
    shape = PRESETS["tiny"] if args.dry_run else replace(PRESETS["llama3.1-8b"], num_layers=layers)
    work = work_for(args, layers, compiled=True)
    header = [
        f"GPU benchmark, {started}: ours against {TORCHTITAN[0]} {TORCHTITAN[1]}, same torch, same machine, one run",
        f"machine: {software.get('gpu', 'CPU (dry run)')}, torch {software['torch']} (CUDA {software['cuda']}, "
        f"cuDNN {software['cudnn']}), Python {software['python']}, transformers {software['transformers']}, "
        f"triton {software['triton']}; driver {driver()}",
        f"model: {shape.name} shape, {layers} layers, seq {work.seq_len}, batch {work.batch_size}, FSDP2 on 1 device, "
        f"bf16 compute, fp32 master weights and AdamW, no activation checkpointing; sizing model's peak "
        f"{'n/a' if predicted is None else f'{predicted / GIB:.1f} GiB'}",
        "attention: SDPA's flash kernel only (math, efficient and cuDNN disabled; ours runs its own, flex attention "
        "over its records' mask on a GPU, one record a block here: causal, as torchtitan's); bf16 peak "
        f"{'n/a' if peak_flops is None else f'{peak_flops / 1e12:.0f}'} TFLOP/s (datasheet), measured bf16 matmul "
        f"{'n/a' if matmul is None else f'{matmul:.0f}'} TFLOP/s; windows of {work.window_steps} steps after "
        f"{work.warmup_steps} warm-up steps, {len({run.round for run in runs})} round(s)",
    ]
    lines = [*header, "", *table(rows), "", *verdict(rows, args.dry_run)]
    (args.out / "gpu_mfu.md").write_text("\n".join(lines) + "\n")
    record = {"started": started, "software": software, "driver": driver(), "matmul_bf16_tflops": matmul,
              "peak_flops": peak_flops, "layers": layers, "predicted_peak_bytes": predicted, "work": asdict(work),
              "rows": rows, "runs": [{**asdict(run), "label": run.label} for run in runs],
              "clock_samples": sampler.samples, "verdict": verdict(rows, args.dry_run)}  # fmt: skip
    (args.out / "gpu_mfu.json").write_text(json.dumps(record, indent=1, default=str))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
