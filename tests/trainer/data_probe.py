"""Run the trainer and record, per rank, how its data set came to be: tokenised by this rank, or mapped.

Launched like the trainer (`python -m tests.trainer.data_probe <trainer flags>`, or under torchrun), it runs
`trainer.main.main` unchanged with the two tokenising entry points (`build_packed_data` as trainer/train.py and
trainer/data/cache.py call it) counted, and the data set the training loop receives inspected. Each rank appends
{"rank", "tokenised", "memory_mapped", "tokens"} as one JSON line to the file named by PROBE_OUTPUT.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np


def main(argv: list[str]) -> int:
    import trainer.data.cache
    import trainer.train
    from trainer.base.pod.env import read_env
    from trainer.main import main as trainer_main

    record: dict[str, Any] = {"rank": read_env().rank, "tokenised": 0, "memory_mapped": None, "tokens": None}
    prepare, train = trainer.data.cache.prepare, trainer.train.train

    def counted_prepare(*args: Any, **kwargs: Any) -> Any:
        record["tokenised"] += 1
        return prepare(*args, **kwargs)

    def inspected_train(config: Any, env: Any, source: Any, device: Any, data: Any, *rest: Any, **kwargs: Any) -> Any:
        record["memory_mapped"] = isinstance(data.tokens, np.memmap) and isinstance(data.trainable, np.memmap)
        record["tokens"] = len(data.tokens)
        return train(config, env, source, device, data, *rest, **kwargs)

    trainer.data.cache.prepare = counted_prepare  # type: ignore[assignment]
    trainer.train.train = inspected_train  # type: ignore[assignment]
    status = trainer_main(argv)
    with open(os.environ["PROBE_OUTPUT"], "a") as handle:
        handle.write(json.dumps(record) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
