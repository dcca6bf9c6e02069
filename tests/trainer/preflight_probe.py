"""A worker for the preflight's tests: the fabric preflight alone, with every rank its own "node" (one torchrun, so
three nodes cost three processes), once per --slow-rank, each time writing what this rank decided.

    torchrun --standalone --nproc-per-node=3 -m tests.trainer.preflight_probe --out DIR --slow-rank 2 --slow-rank 0

Each pass slows that rank's collectives (trainer/base/faults.py slow_preflight) and writes DIR/<pass>.<rank>.json: the
exit code fabric_preflight returned and the preflight figures it recorded for the metrics.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

from trainer.base.faults import FAULT_ENV, slow_preflight_fault
from trainer.base.flags.config import parse_args
from trainer.base.metrics import figures as metrics
from trainer.base.pod.env import read_env
from trainer.checks.fabric_preflight import fabric_preflight

DELAY_MS = 150


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--slow-rank", type=int, action="append", default=[])
    parser.add_argument("--metrics-file")  # the harness adds the trainer's: a failed pass's record goes there
    args, _ = parser.parse_known_args()
    flags = ["--device", "cpu", "--preflight-iterations", "2", "--preflight-bytes", str(2**16)]
    config = parse_args([*flags, "--metrics-file", args.metrics_file] if args.metrics_file else flags)
    env = read_env()
    for index, slow in enumerate(args.slow_rank):
        os.environ[FAULT_ENV] = slow_preflight_fault(DELAY_MS, slow)
        # every rank a node of its own; each pass a start of its own, as a restart of the workers would be
        as_nodes = replace(env, local_world_size=1, group_world_size=env.world_size, attempt=f"{env.attempt}-{index}")
        code = fabric_preflight(config, as_nodes, "cpu")
        figures = {key: value for key, value in metrics._start_figures.items()}
        (args.out / f"{index}.{env.rank}.json").write_text(json.dumps({"code": code, "figures": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
