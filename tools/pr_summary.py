"""The reviewer's summary of a pull request: for each stack, its GPU nodes, GPUs, estimated cost per hour, and the
training job's memory per GPU and whether it fits, before and after the change. The pull-request workflow posts it
as a PR comment, so a reviewer sees what "count: 2 -> 16" means in dollars and in memory without running anything.

    python -m tools.pr_summary                                  # every stack, as it is in the working tree
    python -m tools.pr_summary --base-ref origin/main           # with what each stack was on main
    python -m tools.pr_summary --base-ref origin/main --changed '["p5-16"]' --format json

The figures come from the same code as the stack and the policy pack: the cost is the stack's `estimatedCostPerHour`
at the price the preview's rule gives (stack/price_list.py node_quote), the memory is the pack's `job-memory-fits-gpu`
estimate of the PyTorchJob the stack builds (or of the TrainJob's runtime, with job.api trainjob). The summary runs
without AWS (on forks' pull requests too, beside the previews), so where the preview reads AWS's Price List API it
shows the catalog's figure, labelled as that fallback and dated, or the team's own price.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from policy.memory import estimate, job_shape
from stack.fields import ConfigError
from stack.files import load_stack_config, stack_names
from stack.paths import PROJECT_ROOT
from stack.price_list import CATALOG_CAVEAT, PriceQuote, PriceUnavailableError, node_quote
from workloads.job.api import custom_resource_type, job_api_for
from workloads.job.spec import job_spec

COMMENT_MARKER = "<!-- fsdp-eks:pr-summary -->"
# job_spec wants an image reference; the summary is about shapes, and reading the image's content tag would hash
# the trainer's sources for nothing.
PLACEHOLDER_IMAGE = "pr-summary.invalid/trainer:summary"
WITHOUT_AWS = "the reviewer's summary runs without AWS; the stack's preview reads it (its gpuNodePrice output)"


@dataclass(frozen=True)
class StackSummary:
    stack: str
    instance_type: str | None = None
    nodes: int | None = None
    gpus: int | None = None
    cost_per_hour: float | None = None
    price_source: str | None = None  # stack/price_list.py SOURCE_*
    price_as_of: str | None = None  # the price's date; "" for the team's own
    price_note: str | None = None  # which price, and why not the Price List API's
    model: str | None = None
    sharding_strategy: str | None = None
    memory_per_gpu_gib: float | None = None  # None: no job, or a model the sizing does not know by name
    gpu_memory_gib: int | None = None
    fits: bool | None = None
    error: str | None = None  # the stack's config does not validate


def _price_list_unread() -> PriceQuote:
    raise PriceUnavailableError(WITHOUT_AWS)


def summarize(stack: str, root: Path = PROJECT_ROOT) -> StackSummary:
    try:
        config = load_stack_config(stack, root)
    except ConfigError as error:
        return StackSummary(stack, error="; ".join(error.problems))
    gpu, job = config.gpu_nodes, config.job
    price = node_quote(gpu, _price_list_unread)
    summary = StackSummary(
        stack,
        instance_type=gpu.instance_type,
        nodes=gpu.count,
        gpus=config.total_gpus,
        cost_per_hour=price.nodes_per_hour(gpu.count),
        price_source=price.source,
        price_as_of=price.as_of,
        price_note=price.note,
        gpu_memory_gib=gpu.instance.gpu_memory_gib,
    )
    if not job.enabled or gpu.count < 1:
        return summary
    spec = job_spec(config, image=PLACEHOLDER_IMAGE)
    # The object that holds the job's pods (the PyTorchJob, or a TrainJob's runtime), judged as the pack judges it.
    owner = job_api_for(job.api).pod_owner(spec)
    shape = job_shape(owner, custom_resource_type(owner))
    memory = estimate(shape) if shape is not None else None
    return dataclasses.replace(
        summary,
        model=job.model,
        sharding_strategy=job.sharding_strategy,
        memory_per_gpu_gib=round(memory.needed_gib, 2) if memory else None,
        fits=memory.fits if memory else None,
    )


def base_summaries(ref: str, root: Path = PROJECT_ROOT) -> dict[str, StackSummary]:
    """Each stack as it is at `ref`: its stack file from git, read by the current code (the summary is about what
    the config change does)."""
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", ref], cwd=root, check=True, capture_output=True, text=True
    ).stdout.split()
    names = [n for n in listed if n.startswith("Pulumi.") and n.endswith(".yaml") and n != "Pulumi.yaml"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            text = subprocess.run(
                ["git", "show", f"{ref}:{name}"], cwd=root, check=True, capture_output=True, text=True
            ).stdout
            (Path(tmp) / name).write_text(text)
        return {stack: summarize(stack, Path(tmp)) for stack in stack_names(Path(tmp))}


def _money(value: float | None) -> str:
    return "" if value is None else f"${value:,.2f}"


def _price(s: StackSummary) -> str:
    return ", ".join(part for part in (s.price_source, s.price_as_of) if part)


def _memory(s: StackSummary) -> str:
    if s.memory_per_gpu_gib is None:
        return "n/a" if s.model else "no job"
    needed = "< 0.1" if s.memory_per_gpu_gib < 0.1 else f"{s.memory_per_gpu_gib:.1f}"
    return f"{needed} / {s.gpu_memory_gib} GiB"


def _fits(s: StackSummary) -> str:
    return {True: "yes", False: "**NO**", None: "n/a"}[s.fits]


Column = Callable[[StackSummary], str]
COLUMNS: tuple[tuple[str, Column], ...] = (
    ("Instance", lambda s: s.instance_type or ""),
    ("Nodes", lambda s: "" if s.nodes is None else str(s.nodes)),
    ("GPUs", lambda s: "" if s.gpus is None else str(s.gpus)),
    ("Est. $/hour", lambda s: _money(s.cost_per_hour)),
    ("Price from", _price),
    ("Model", lambda s: s.model or ""),
    ("Sharding", lambda s: s.sharding_strategy or ""),
    ("Memory/GPU", _memory),
    ("Fits", _fits),
)


def _cell(column: Column, now: StackSummary, before: StackSummary | None) -> str:
    new, old = column(now), (column(before) if before is not None else None)
    return new if old is None or old == new else f"{old} → **{new}**"


def markdown(current: Sequence[StackSummary], base: dict[str, StackSummary] | None, changed: Sequence[str] = ()) -> str:
    lines = [COMMENT_MARKER, "### fsdp-eks: what this change means per stack", ""]
    lines += ["| Stack | " + " | ".join(name for name, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    ordered = sorted(current, key=lambda s: (s.stack not in changed, s.stack))
    for s in ordered:
        before = (base or {}).get(s.stack)
        label = f"**{s.stack}**" if s.stack in changed else s.stack
        if base is not None and before is None:
            label += " (new)"
        if s.error:
            lines.append(f"| {label} | config error: {s.error} |" + " |" * (len(COLUMNS) - 1))
            continue
        lines.append(f"| {label} | " + " | ".join(_cell(col, s, before) for _, col in COLUMNS) + " |")
    for stack in sorted(set(base or {}) - {s.stack for s in current}):
        lines.append(f"| ~~{stack}~~ (removed) |" + " |" * len(COLUMNS))
    lines += [
        "",
        "Cost: GPU nodes x one node-hour's price, by the preview's rule: `gpuNodes.pricePerHour`, else AWS's Price "
        "List API, else the catalog's list price. This summary runs without AWS, so it shows the catalog's figure "
        f"as that fallback, dated ({CATALOG_CAVEAT}); each changed stack's preview reads the current price and "
        "budgets with it (its `gpuNodePrice` and `estimatedCostPerHour` outputs). Memory/GPU: what `sizing.estimate` "
        "says the job needs per GPU (peak, allocator headroom, CUDA runtime) against the GPU's memory, as the policy "
        "`job-memory-fits-gpu` checks it. "
        "Policy results are in each stack's Pulumi preview comment.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pr_summary", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base-ref", help="git ref to compare with (the pull request's base)")
    parser.add_argument("--changed", default="[]", help="JSON list of the stacks the pull request changes")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    current = [summarize(stack) for stack in stack_names()]
    base = base_summaries(args.base_ref) if args.base_ref else None
    if args.format == "json":
        document = {
            "stacks": [dataclasses.asdict(s) for s in current],
            "base": {k: dataclasses.asdict(v) for k, v in base.items()} if base is not None else None,
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(markdown(current, base, json.loads(args.changed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
