"""The trainer's runtime baseline on CPU: peak RSS of a trainer process just before it builds the model.

Runs the trainer's own start-up, in its order (trainer/main.py, trainer/train.py `run`): parse the flags, resolve
the model, load the data, join the process group, import the model code and build the model on the meta device
(no memory). Whatever is resident then (Python, torch, transformers, the tokenised data, gloo) is the baseline the
sizing model adds as its `runtime` term on CPU. Launched like the trainer (plain or under torchrun); each rank
appends {"rank", "world_size", "peak_rss_bytes"} as one JSON line to the file named by PROBE_OUTPUT.

    PROBE_OUTPUT=baseline.jsonl python -m tests.sizing.trainer_memory.baseline_probe --model small --device cpu
"""

from __future__ import annotations

import json
import os
import sys

from trainer.base.flags.config import parse_args
from trainer.base.flags.parallel_plan import make_plan
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import read_env
from trainer.model.build import build_meta_model, hf_config
from trainer.record.reporting import peak_rss_bytes
from trainer.train import init_distributed, load_data, pick_device


def main(argv: list[str]) -> None:
    import torch.distributed as dist

    config, env = parse_args(argv), read_env()
    source = resolve_model(config.model.name)
    device = pick_device("cpu", env)
    make_plan(config, env)
    _, _data = load_data(config, source)
    init_distributed(env, device)
    build_meta_model(hf_config(source))
    peak = peak_rss_bytes()  # the trainer's own figure, so both sides of the comparison measure alike
    record = {"rank": env.rank, "world_size": env.world_size, "peak_rss_bytes": peak}
    with open(os.environ["PROBE_OUTPUT"], "a") as handle:
        handle.write(json.dumps(record) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
