"""--all-reduce-dtype bf16 on a HYBRID_SHARD mesh of 2 replicas x 1 shard (gloo): the all-reduce across replicas runs
in bf16 and the gradients equal the fp32 path's within bf16 rounding; refused without HYBRID_SHARD."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import FSDPModule
from torch.nn import functional

from trainer.base.flags.config import ParallelConfig, TrainConfig, config_problems, parse_args
from trainer.base.flags.parallel_plan import make_plan
from trainer.base.model.source import resolve_model
from trainer.base.pod.env import DistEnv
from trainer.parallel.all_reduce import Bf16AllReduce
from trainer.parallel.parallelize import build_mesh
from trainer.train import build_model

WORLD, BATCH, SEQ_LEN, MICRO_STEPS = 2, 2, 16, 2


class Recording(dist.ProcessGroup):
    """A process group that records the dtype of every all-reduce it passes on."""

    def __init__(self, inner: dist.ProcessGroup) -> None:
        super().__init__(inner.rank(), inner.size())  # pyright: ignore[reportCallIssue]
        self.inner, self.dtypes = inner, list[torch.dtype]()

    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        self.dtypes += [tensor.dtype for tensor in tensors]
        return self.inner.allreduce(tensors, opts)


def record_replica_all_reduces(model: torch.nn.Module) -> Recording:
    """Wrap the group that finally all-reduces across replicas: FSDP's own, or the one Bf16AllReduce passes to."""
    recording: Recording | None = None
    for module in model.modules():
        if isinstance(module, FSDPModule):
            state: Any = module._get_fsdp_state()  # pyright: ignore[reportPrivateUsage]
            for group in state._fsdp_param_groups:
                outer = group.mesh_info.replicate_process_group
                inner = outer.replicas if isinstance(outer, Bf16AllReduce) else outer
                recording = recording or Recording(inner)
                if isinstance(outer, Bf16AllReduce):
                    outer.replicas = recording
                else:
                    group.mesh_info.replicate_process_group = recording
    assert recording is not None
    return recording


def gradients_on_rank(rank: int, store_path: str, out_dir: str) -> None:
    dist.init_process_group("gloo", store=dist.FileStore(store_path, WORLD), rank=rank, world_size=WORLD)
    try:
        env = DistEnv(world_size=WORLD, local_world_size=1, rank=rank)
        tokens = torch.randint(0, 256, (MICRO_STEPS, BATCH, SEQ_LEN + 1), generator=torch.Generator().manual_seed(rank))
        for dtype in ("fp32", "bf16"):
            config = TrainConfig(
                parallel=ParallelConfig("HYBRID_SHARD", 2, "fp32", all_reduce_dtype=dtype, device="cpu")
            )
            mesh = build_mesh("HYBRID_SHARD", make_plan(config, env), "cpu")
            model, _ = build_model(resolve_model("tiny"), config, mesh, torch.device("cpu"), env, dist.group.WORLD)  # pyright: ignore[reportArgumentType]
            recording = record_replica_all_reduces(model)
            for index, micro in enumerate(tokens):  # as trainer/train.py: one all-reduce, on the last micro step
                cast(FSDPModule, model).set_requires_all_reduce(index == MICRO_STEPS - 1)
                logits = model(input_ids=micro[:, :-1]).logits
                functional.cross_entropy(logits.flatten(0, 1), micro[:, 1:].flatten(), reduction="sum").backward()
            grads = {name: p.grad.to_local() for name, p in model.named_parameters() if p.grad is not None}  # pyright: ignore[reportAttributeAccessIssue]
            torch.save({"grads": grads, "dtypes": recording.dtypes}, Path(out_dir) / f"{dtype}-{rank}.pt")
        dist.barrier()  # every rank past its last collective before any tears the group down
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two ranks over gloo
@pytest.mark.timeout(120)
def test_bf16_all_reduce_runs_in_bf16_and_matches_fp32_within_its_rounding(tmp_path: Path) -> None:
    mp.spawn(gradients_on_rank, args=(str(tmp_path / "store"), str(tmp_path)), nprocs=WORLD)
    for rank in range(WORLD):
        fp32, bf16 = (torch.load(tmp_path / f"{dtype}-{rank}.pt") for dtype in ("fp32", "bf16"))
        assert set(fp32["dtypes"]) == {torch.float32} and set(bf16["dtypes"]) == {torch.bfloat16}
        assert len(bf16["dtypes"]) == len(fp32["dtypes"])  # once per unit per step: the same all-reduces
        assert fp32["grads"].keys() == bf16["grads"].keys() and fp32["grads"]
        rounded = 0
        for name, exact in fp32["grads"].items():
            low = bf16["grads"][name]
            assert low.dtype == torch.float32, name  # the gradient itself stays fp32
            # Two summands each rounded to bf16 (8 bits of mantissa), then their sum: within 2^-7 of the largest.
            torch.testing.assert_close(low, exact, rtol=0, atol=2**-7 * exact.abs().max().item(), msg=name)
            rounded += int(not torch.equal(low, exact))
        assert rounded > 0  # the values really went through bf16
    # Both replicas hold the same summed gradients.
    for dtype in ("fp32", "bf16"):
        first, second = (torch.load(tmp_path / f"{dtype}-{rank}.pt")["grads"] for rank in range(WORLD))
        assert all(torch.equal(first[name], second[name]) for name in first)


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"])
def test_bf16_all_reduce_is_refused_without_hybrid_shard(strategy: str) -> None:
    config = parse_args(["--sharding-strategy", strategy, "--all-reduce-dtype", "bf16"])
    assert config_problems(config) == [
        f"--all-reduce-dtype bf16: only with --sharding-strategy HYBRID_SHARD (not {strategy})"
    ]


def test_bf16_all_reduce_is_accepted_with_hybrid_shard() -> None:
    config = parse_args(["--sharding-strategy", "HYBRID_SHARD", "--all-reduce-dtype", "bf16"])
    assert make_plan(config, DistEnv(world_size=16, local_world_size=8)).replicate == 2


@pytest.mark.usefixtures("world_of_one")
def test_one_replica_keeps_the_exact_fp32_all_reduce() -> None:
    """HYBRID_SHARD with one replica (one node, or an elastic job shrunk to one) sends nothing between nodes: the
    gradients are not rounded through bf16 for nothing."""
    env = DistEnv(world_size=1, local_world_size=1, rank=0)
    config = TrainConfig(parallel=ParallelConfig("HYBRID_SHARD", 1, "fp32", all_reduce_dtype="bf16", device="cpu"))
    mesh = build_mesh("HYBRID_SHARD", make_plan(config, env), "cpu")
    model, _ = build_model(resolve_model("tiny"), config, mesh, torch.device("cpu"), env, dist.group.WORLD)  # pyright: ignore[reportArgumentType]
    groups = [
        group.mesh_info.replicate_process_group
        for module in model.modules()
        if isinstance(module, FSDPModule)
        for group in cast(Any, module)._get_fsdp_state()._fsdp_param_groups
    ]
    assert groups and not any(isinstance(group, Bf16AllReduce) for group in groups)
