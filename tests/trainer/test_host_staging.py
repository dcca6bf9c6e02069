"""A save under HYBRID_SHARD stages only what each rank writes: on a 2-rank HSDP mesh (2 replicas x 1 shard) each
rank hands DCP (and so the stager) only the tensors it writes, together one copy of the state where each rank staged
all of it before, and the checkpoints (synchronous, in the background, and on S3) load back identically on another
world size."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from local.s3 import LocalS3
from tests.trainer.process_groups import DEFAULT_GROUP
from trainer.base.checkpoint.writers import assign_replicas, replicas_of
from trainer.base.errors import InputError
from trainer.base.flags.config import ArtifactsConfig, CheckpointConfig, OptimConfig
from trainer.base.pod.env import DistEnv
from trainer.checkpoint.checkpointer import Checkpointer, Progress, TrainState, writer_share
from trainer.checkpoint.layout import checkpoint_name
from trainer.comms.distributed import io_group
from trainer.loss_scale import LossScaler
from trainer.optim import build_optimizer, build_scheduler

pytestmark = [pytest.mark.timeout(240)]
BUCKET = "host-staging"
WORLD = 2
SYNC_STEP, ASYNC_STEP = 1, 2


def make_model() -> nn.Sequential:
    """Tensors of several sizes, so the split between the replicas is not a plain alternation."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 24), nn.Linear(24, 16), nn.Linear(16, 4, bias=False))


def make_state(model: nn.Module) -> TrainState:
    optimizer = build_optimizer(model, OptimConfig())
    return TrainState(model, optimizer, build_scheduler(optimizer, OptimConfig(), 10), LossScaler(False), Progress())


def train_one_step(state: TrainState, rank: int) -> None:
    inputs = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))  # each replica its own data
    state.model(inputs).square().sum().backward()
    state.optimizer.step()
    state.scheduler.step()


def tensor_bytes(tree: Any) -> dict[str, int]:
    """Bytes of each tensor this rank holds in a (nested) state dict, by path: a DTensor's local shard."""
    found: dict[str, int] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            found.update({f"{key}/{path}": size for path, size in tensor_bytes(value).items()})
        elif isinstance(value, torch.Tensor):
            local = value.to_local() if isinstance(value, DTensor) else value
            found[str(key)] = local.numel() * local.element_size()
    return found


def full_state(state: TrainState) -> dict[str, torch.Tensor]:
    """The trained weights and AdamW moments as whole tensors."""
    found: dict[str, torch.Tensor] = {}
    for name, param in state.model.named_parameters():
        assert isinstance(param, DTensor)
        found[f"model/{name}"] = param.full_tensor()
        for moment in ("exp_avg", "exp_avg_sq"):
            found[f"optim/{name}/{moment}"] = state.optimizer.state[param][moment].full_tensor()
    return found


def save_on_rank(rank: int, tmp: str, s3_env: dict[str, str]) -> None:
    os.environ.update(s3_env)
    dist.init_process_group("gloo", store=dist.FileStore(f"{tmp}/store", WORLD), rank=rank, world_size=WORLD)
    try:
        mesh = init_device_mesh("cpu", (WORLD, 1), mesh_dim_names=("dp_replicate", "dp_shard"))  # HSDP: 2 x 1
        model = make_model()
        for layer in model:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        state = make_state(model)
        train_one_step(state, rank)
        handed: list[dict[str, int]] = []  # what each save hands DCP: all this rank stages and writes
        real_save, real_async_save = dcp.save, dcp.async_save

        def spy_save(state_dict: Any, **kwargs: Any) -> Any:
            handed.append(tensor_bytes(state_dict))
            return real_save(state_dict, **kwargs)

        def spy_async_save(state_dict: Any, **kwargs: Any) -> Any:
            handed.append(tensor_bytes(state_dict))
            return real_async_save(state_dict, **kwargs)

        dcp.save, dcp.async_save = spy_save, spy_async_save  # pyright: ignore[reportAttributeAccessIssue]
        env = DistEnv(rank=rank, world_size=WORLD, local_rank=rank, local_world_size=WORLD)
        io = io_group()
        for step, background in ((SYNC_STEP, False), (ASYNC_STEP, True)):
            state.progress = Progress(step, step * 8)
            config = CheckpointConfig(directory=f"{tmp}/{'async' if background else 'sync'}", async_save=background)
            artifacts = ArtifactsConfig(uri=f"s3://{BUCKET}/run") if background else None
            checkpointer = Checkpointer(config, env, "cpu", {}, io, None, artifacts, last_step=ASYNC_STEP)
            checkpointer.save(state)
            checkpointer.finish()
            checkpointer.close()
        whole = tensor_bytes(checkpointer._state(state))  # pyright: ignore[reportPrivateUsage]  # all, staged before
        torch.save({"handed": handed, "whole": whole, "state": full_state(state)}, f"{tmp}/rank{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def s3() -> Any:
    with LocalS3.start() as server:
        server.create_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, s3: LocalS3) -> Path:
    """Two ranks of an HSDP mesh train one step, then save it synchronously, and in the background to S3 too."""
    tmp = tmp_path_factory.mktemp("hsdp")
    mp.spawn(save_on_rank, args=(str(tmp), s3.client_environment()), nprocs=WORLD)
    return tmp


@pytest.mark.slow  # two ranks over gloo save first (the `saved` fixture)
def test_each_rank_stages_only_its_share_and_together_one_copy(saved: Path) -> None:
    ranks = [torch.load(saved / f"rank{rank}.pt") for rank in range(WORLD)]
    whole = ranks[0]["whole"]
    replicated = {path: size for path, size in whole.items() if path.startswith(("model/", "optim/state/"))}
    replicated = {path: size for path, size in replicated.items() if not path.endswith("/step")}  # plain tensors
    for save in range(3):  # the synchronous save, the background one, then its S3 write (of the same staged copy)
        handed = [ranks[rank]["handed"][save] for rank in range(WORLD)]
        assert not set(handed[0]) & set(handed[1])  # no tensor staged twice
        assert set(handed[0]) | set(handed[1]) == set(whole)  # and none left out
        together = sum(size for share in handed for size in share.values())
        assert together == sum(whole.values())  # one copy in all, where each rank staged all of it before
        staged = [sum(size for path, size in share.items() if path in replicated) for share in handed]
        assert all(0 < bytes_ < sum(replicated.values()) for bytes_ in staged), staged
        owners = assign_replicas(replicated, WORLD)
        for rank in range(WORLD):
            assert {p for p in handed[rank] if p in replicated} == {p for p, r in owners.items() if r == rank}


@pytest.mark.slow  # two ranks over gloo save first (the `saved` fixture)
def test_each_rank_writes_exactly_what_it_staged(saved: Path) -> None:
    """DCP names each rank's data file __<rank>_<n>.distcp (FileSystemWriter): the items in rank r's files are the
    ones rank r handed it."""
    handed = [{p.replace("/", ".") for p in torch.load(saved / f"rank{rank}.pt")["handed"][0]} for rank in range(WORLD)]
    metadata = FileSystemReader(str(saved / "sync" / checkpoint_name(SYNC_STEP))).read_metadata()
    written: list[set[str]] = [set(), set()]
    for index, stored in metadata.storage_data.items():
        written[int(stored.relative_path.split("_")[2])].add(index.fqn)
    tensors = handed[0] | handed[1]
    for rank in range(WORLD):
        assert written[rank] & tensors == handed[rank]


@pytest.mark.slow  # two ranks over gloo save first (the `saved` fixture)
@pytest.mark.parametrize("tier", ["sync", "async", "s3"])
def test_the_checkpoint_loads_back_identically_on_one_rank(
    tier: str, saved: Path, s3: LocalS3, monkeypatch: pytest.MonkeyPatch, world_of_one: None
) -> None:
    """Saved by 2 replicas, loaded by 1 rank: DCP reshards to the new mesh, and every tensor is the one trained."""
    for name, value in s3.client_environment().items():
        monkeypatch.setenv(name, value)
    expected = torch.load(saved / "rank0.pt")["state"]
    model = make_model()
    fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("dp_shard",)))
    state = make_state(model)
    directory = saved / ("sync" if tier == "sync" else "async")
    step = SYNC_STEP if tier == "sync" else ASYNC_STEP
    if tier == "s3":
        directory = saved / "empty"  # nothing in the fast tier: the run resumes from its durable tier
        directory.mkdir(exist_ok=True)
    artifacts = ArtifactsConfig(uri=f"s3://{BUCKET}/run") if tier == "s3" else None
    config = CheckpointConfig(directory=str(directory))
    checkpointer = Checkpointer(config, DistEnv(), "cpu", {}, DEFAULT_GROUP, None, artifacts)
    checkpointer.restore(state)
    assert state.progress.step == step
    loaded = full_state(state)
    assert loaded.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(loaded[name], tensor), name


def test_a_mesh_without_replicas_stages_everything(world_of_one: None, tmp_path: Path) -> None:
    """FULL_SHARD: every shard is unique, so every rank writes all it holds."""
    model = make_model()
    fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("dp_shard",)))
    state = make_state(model)
    train_one_step(state, 0)
    checkpointer = Checkpointer(CheckpointConfig(directory=str(tmp_path)), DistEnv(), "cpu", {}, DEFAULT_GROUP)
    whole = checkpointer._state(state)  # pyright: ignore[reportPrivateUsage]
    assert writer_share(whole) is whole


def test_the_writers_and_the_weights_readers_count_replicas_by_one_rule() -> None:
    """writer_share and load_pretrained_weights both split over replicas_of: a tensor replicated a different number
    of times (a second replicate dimension) is refused, never split over the largest count."""
    assert replicas_of([]) == 1
    assert replicas_of([1, 1]) == 1  # FULL_SHARD: nothing replicated
    assert replicas_of([4, 4, 1]) == 4
    with pytest.raises(ValueError, match=r"replicated \[2, 4\] times"):
        replicas_of([4, 2, 4])


@pytest.mark.slow  # two ranks over gloo save first (the `saved` fixture)
def test_a_model_loads_from_the_durable_tier_only_from_a_complete_checkpoint(
    world_of_one: None, saved: Path, s3: LocalS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_model (--keep-best's export) reads a checkpoint missing from the fast tier from S3: the complete one, and
    never one without meta.json, whose objects may be half a save's."""
    for name, value in s3.client_environment().items():
        monkeypatch.setenv(name, value)
    artifacts = ArtifactsConfig(uri=f"s3://{BUCKET}/run")
    client, complete = s3.client(), f"run/checkpoints/{checkpoint_name(ASYNC_STEP)}/"
    partial = f"run/checkpoints/{checkpoint_name(ASYNC_STEP + 1)}/"
    for item in client.list_objects_v2(Bucket=BUCKET, Prefix=complete)["Contents"]:
        if not item["Key"].endswith("meta.json"):
            source = {"Bucket": BUCKET, "Key": item["Key"]}
            client.copy_object(Bucket=BUCKET, Key=partial + item["Key"][len(complete) :], CopySource=source)
    model = make_model()
    fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("dp_shard",)))
    config = CheckpointConfig(directory=str(tmp_path))
    checkpointer = Checkpointer(config, DistEnv(), "cpu", {}, DEFAULT_GROUP, None, artifacts)
    assert str(checkpointer.load_model(model, ASYNC_STEP)) == f"s3://{BUCKET}/{complete.rstrip('/')}"
    with pytest.raises(InputError, match=rf"{checkpoint_name(ASYNC_STEP + 1)} is complete in neither tier"):
        checkpointer.load_model(model, ASYNC_STEP + 1)
