"""The S3 requests a save of each shipped stack's job sends, modelled (sizing/s3_requests.py): docs/job.md's table.

python -m stack.s3_save        # the table, one row per Pulumi.<stack>.yaml, at the part size the trainer uses
"""

from __future__ import annotations

from sizing.catalog import instance_type
from sizing.fsx import checkpoint_bytes
from sizing.s3_requests import SaveRequests
from stack.config import StackConfig
from stack.files import load_stack_config, stack_names
from trainer.base.model.presets import find_shape
from trainer.base.s3.limits import MIB, PART_BYTES, PUTS_PER_PREFIX_PER_S

CONNECTOR_DEFAULT_PART_BYTES = 8 * MIB  # s3torchconnector 1.5.0 S3ClientConfig.part_size


def save_requests(config: StackConfig, part_bytes: int = PART_BYTES) -> SaveRequests | None:
    """A save of the job's checkpoint by all its ranks at the stack's full size; None for a model known only by its
    config.json."""
    shape = find_shape(config.job.model)
    if shape is None:
        return None
    instance = instance_type(config.gpu_nodes.instance_type)
    saved = checkpoint_bytes(shape, config.job.lora.rank, tuple(config.job.lora.targets))
    return SaveRequests(saved, config.total_gpus, instance.gpus, instance.network_gbps, part_bytes)


def table() -> str:
    """Markdown: per stack, the save's size, ranks, requests, seconds and PUT/s at PART_BYTES, and the PUT/s the
    connector's default part size would have made."""
    columns = ["stack", "checkpoint", "ranks", "requests per save", "save (s)", "PUT/s", "prefixes at 3,500/s"]
    columns.append("PUT/s at 8 MiB parts")
    rows = [f"| {' | '.join(columns)} |", f"| {' | '.join('---' for _ in columns)} |"]
    for stack in stack_names():
        config = load_stack_config(stack)
        ours, default = save_requests(config), save_requests(config, CONNECTOR_DEFAULT_PART_BYTES)
        if ours is None or default is None:
            continue
        rows.append(
            f"| {stack} | {ours.checkpoint_bytes / 2**30:,.1f} GiB | {ours.ranks} | {ours.requests:,} | "
            f"{ours.seconds:.2f} | {ours.puts_per_s:,.0f} | {ours.prefixes_needed} | {default.puts_per_s:,.0f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(f"Modelled (sizing/s3_requests.py): {PUTS_PER_PREFIX_PER_S:,} PUT/s per partitioned prefix.")
    print(table())
