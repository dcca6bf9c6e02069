"""Run the trainer with every training step's operations counted: collectives, and reads that synchronise the host
with the device.

Launched like the trainer (`python -m tests.trainer.step_probe <trainer flags>`, or under torchrun), it runs
`trainer.main.main` unchanged, with the training loop's `train_step` and `StepReporter.report` wrapped in a
TorchDispatchMode that sees every aten and c10d operation they issue. CUDA-free: on CPU the same operations are
dispatched as on a GPU, so what would make the host wait for a GPU shows here too:
- `aten._local_scalar_dense` (tensor.item(), float(tensor), int(tensor), `if tensor:`), `aten.is_nonzero`,
  `aten.equal`: a value read on the host;
- `aten.nonzero`, `aten.masked_select`, `aten._unique2`: an output whose size depends on the data;
- indexing by a boolean mask (`x[mask]`, `x[mask] = y`), which calls nonzero inside its kernel.
AdamW's step counters are host tensors on a GPU too (torch.optim.AdamW without capturable), so reading them is
no synchronisation and is not counted. Each rank appends one JSON line to the file named by PROBE_OUTPUT:
{"rank", "steps": [{"collectives": {op: count}, "syncs": [op, ...]}], "reports": [{"syncs": [...]}]}.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
SYNCING_OPS = {
    aten._local_scalar_dense.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
}
# Indexing by a boolean mask: the kernel turns the mask into indices with nonzero inside C++ (aten/src/ATen/native/
# TensorAdvancedIndexing.cpp, expandTensors), below this mode, so the op is counted by its arguments.
MASK_INDEXING_OPS = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional")


def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)


class StepOps(TorchDispatchMode):
    """Counts the collectives and host-device synchronisations of the code run under it."""

    def __init__(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        super().__init__()
        self.optimizer = optimizer
        """Its step counters live on the host on a GPU too (created in the first step, so looked up when read)."""
        self.collectives: Counter[str] = Counter()
        self.syncs: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func.namespace in COLLECTIVE_NAMESPACES:
            self.collectives[func.__name__.split(".")[0]] += 1
        elif func in SYNCING_OPS and not self._on_host(args[0]):
            self.syncs.append(func.__name__.split(".")[0])
        elif func in MASK_INDEXING_OPS and any(_is_mask(index) for index in args[1]):
            self.syncs.append(f"{func.__name__.split('.')[0]} by a boolean mask")
        return func(*args, **(kwargs or {}))

    def _on_host(self, tensor: Any) -> bool:
        if self.optimizer is None or not isinstance(tensor, torch.Tensor):
            return False
        counters = (state.get("step") for state in self.optimizer.state.values())
        address = tensor.untyped_storage().data_ptr()
        return any(isinstance(c, torch.Tensor) and c.untyped_storage().data_ptr() == address for c in counters)


def sharded_units(model: torch.nn.Module) -> int:
    """FSDP units that own parameters: each reduces its own gradients. One unit may span several modules (the
    final norm and the output layer share one), and a unit without parameters (a root whose parameters all went to
    sub-units) issues no collective."""
    from torch.distributed.fsdp import FSDPModule

    groups = {
        id(group): group
        for module in model.modules()
        if isinstance(module, FSDPModule) and (group := module._get_fsdp_state()._fsdp_param_group) is not None
    }
    return sum(1 for group in groups.values() if group.fsdp_params)


def main(argv: list[str]) -> int:
    import trainer.train
    from trainer.base.pod.env import read_env
    from trainer.main import main as trainer_main
    from trainer.parallel.embedding import VocabShardedEmbedding
    from trainer.record.reporting import StepReporter

    steps: list[dict[str, Any]] = []
    reports: list[dict[str, Any]] = []
    train_step, report = trainer.train.train_step, StepReporter.report

    def counted_step(state: Any, *args: Any, **kwargs: Any) -> Any:
        with StepOps(state.optimizer) as ops:
            result = train_step(state, *args, **kwargs)
        steps.append(
            {
                "collectives": dict(ops.collectives),
                "syncs": ops.syncs,
                "units": sharded_units(state.model),
                "embedding_by_rows": isinstance(state.model.get_input_embeddings(), VocabShardedEmbedding),
            }
        )
        return result

    def counted_report(self: StepReporter, *args: Any, **kwargs: Any) -> None:
        with StepOps() as ops:
            report(self, *args, **kwargs)
        reports.append({"syncs": ops.syncs})

    trainer.train.train_step = counted_step  # type: ignore[assignment]
    StepReporter.report = counted_report  # type: ignore[method-assign]
    status = trainer_main(argv)
    record = {"rank": read_env().rank, "steps": steps, "reports": reports}
    with open(os.environ["PROBE_OUTPUT"], "a") as handle:
        handle.write(json.dumps(record) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
