"""--all-reduce-dtype bf16: HYBRID_SHARD's gradient all-reduce across replica groups (between nodes) in bf16, every
other part of FSDP2's reduction as it is.

Under HYBRID_SHARD, FSDP2 reduce-scatters a layer's gradients within its shard group and all-reduces the resulting
shard across the replica groups, both in MixedPrecisionPolicy.reduce_dtype (fp32 here); micro steps before the last
only add their reduce-scatter output into a partial sum, all-reduced once on the last (torch 2.13
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce: `partial_reduce_output`,
`dist.all_reduce(reduce_output, group=all_reduce_group, op=all_reduce_op)` on the all-reduce stream). FSDPModule
offers no dtype of its own for that all-reduce: reduce_dtype sets both collectives, and set_all_reduce_hook runs
after FSDP's own all-reduce, not instead of it (_fully_shard.py). So the group FSDP all-reduces over is swapped for
`Bf16AllReduce`, a process group that casts the fp32 shard to bf16, all-reduces that over the real replica group,
and writes the sum back into the fp32 shard: half the bytes between nodes, FSDP's accumulation, streams and overlap
unchanged, the result FSDP's own up to bf16 rounding of the summands and of the sum.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule

REPLICATE_DIM = "dp_replicate"  # trainer/parallel/parallelize.py build_mesh's name for the replicate dimension


class Bf16AllReduce(dist.ProcessGroup):
    """A process group whose all-reduce runs in bf16 over `replicas`: what FSDP2 reduces across replica groups.

    Only all-reduce is implemented: FSDP calls nothing else on its all-reduce group (foreach_reduce), and a Python
    subclass of ProcessGroup is dispatched to by torch.distributed's functions (c10d's PyProcessGroup trampoline).
    """

    def __init__(self, replicas: dist.ProcessGroup) -> None:
        # c10d binds ProcessGroup(rank, size) for Python subclasses too; torch's stub lists only (store, rank, size).
        super().__init__(replicas.rank(), replicas.size())  # pyright: ignore[reportCallIssue]
        self.replicas = replicas

    def allreduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        # On CUDA all of this is queued on the caller's stream (FSDP's all-reduce stream): NCCL's work waits for the
        # cast, and wait() makes the stream wait for NCCL before the copy back; nothing waits on the host.
        for tensor in tensors:
            low = tensor.to(torch.bfloat16)
            self.replicas.allreduce([low], opts).wait()
            tensor.copy_(low)
        # Done already, in stream order: a completed future. Made without devices, it records no CUDA events for its
        # value (c10 ivalue_inl.h Future::markCompleted checks storages only off the CPU), which is right here: the
        # caller's stream already waits for the copy back.
        done: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        done.set_result(tensors)
        return torch._C._distributed_c10d._create_work_from_future(done)  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]

    def getBackendName(self) -> str:  # noqa: N802 - ProcessGroup's own name for it
        return f"bf16-all-reduce({self.replicas.name()})"


def apply_bf16_all_reduce(model: nn.Module, mesh: DeviceMesh) -> None:
    """Make every FSDP unit of `model` all-reduce across the mesh's replica groups in bf16.

    Each unit's FSDPParamGroup reads its all-reduce group from its mesh info's `replicate_process_group` when it
    reduces (_fsdp_param_group.py `_all_reduce_process_group`; _fsdp_common.py DDPMeshInfo sets it once from the
    mesh); the DeviceMesh itself, and so every DTensor, the gradient norm and the checkpoints, keep the real group.
    """
    replicas = mesh.get_group(REPLICATE_DIM)
    if replicas.size() == 1:
        # One replica (HYBRID_SHARD on one node, an elastic job shrunk to one): no bytes cross nodes, and FSDP's
        # all-reduce over the group of one leaves the fp32 gradients exact, which a bf16 round trip would not.
        return
    group = Bf16AllReduce(replicas)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            state: Any = module._get_fsdp_state()  # pyright: ignore[reportPrivateUsage]
            for param_group in state._fsdp_param_groups:
                param_group.mesh_info.replicate_process_group = group
