"""torchtitan 0.2.2's own Trainer on the GPU benchmark's work (bench/gpu_mfu.py), one process under torchrun, with the
carried torchtitan (bench/carried_torchtitan.py) first on PYTHONPATH.

    python -m torch.distributed.run --standalone --nproc-per-node 1 bench/gpu_titan_row.py --layers 16 \\
        --seq-len 4096 --batch-size 2 --warmup-steps 3 --window-steps 5 --windows 4 --compile True --device cuda \\
        --result /tmp/titan.json

torchtitan's as it ships: its Llama 3 model (the 8B flavour with `--layers` layers), its parallelize_llama (compile
of each block and of the loss when compiling, no activation checkpointing), its FSDP2 (apply_fsdp: every block
resharded after forward, norm and output kept), its train step, fused AdamW and plain cross-entropy. Ours, because
the work must be the same: the shape and batch; SDPA's flash kernel alone (its attention wrapper would try cuDNN
first); a data loader of seeded random token ids below 256 (the byte tokenizer's range; their values do not change
the work) with a tokenizer that only reports the vocabulary size; and FSDP2 applied on the one GPU with torchtitan's
own apply_fsdp, which its parallelize_llama skips for a data-parallel degree of 1 (the trainer would then run
autocast instead). Imports torch, torchtitan and bench/gpu_rows.py only.
"""

# torchtitan is carried to the GPU machine (bench/carried_torchtitan.py), not installed where the checker runs.
# pyright: reportMissingImports=false

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.gpu_rows import (
    RowResult,
    Windows,
    Work,
    add_work_arguments,
    attention_flops_per_token,
    attention_operators,
    compile_backend,
    peak_memory_bytes,
    pin_flash_attention,
    work_from,
)

NAME = "fsdp_eks_bench"
TINY = {"dim": 64, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 260, "multiple_of": 16}  # trainer's `tiny` preset
LLAMA_3_1_8B = {"dim": 4096, "n_heads": 32, "n_kv_heads": 8, "vocab_size": 128256, "multiple_of": 1024,
                "ffn_dim_multiplier": 1.3, "rope_theta": 500000}  # fmt: skip  # torchtitan's "8B" flavour


def model_args(work: Work) -> Any:
    from torchtitan.models.llama3 import TransformerModelArgs

    shape = TINY if work.device == "cpu" else LLAMA_3_1_8B
    return TransformerModelArgs(n_layers=work.layers, max_seq_len=work.seq_len, **shape)


def train_spec(work: Work) -> Any:
    """torchtitan's llama3 TrainSpec with the benchmark's shape, data and one-GPU FSDP."""
    from torch.distributed.device_mesh import init_device_mesh
    from torchtitan.components.dataloader import BaseDataLoader
    from torchtitan.components.tokenizer import BaseTokenizer
    from torchtitan.config import TORCH_DTYPE_MAP
    from torchtitan.models.llama3.infra.parallelize import apply_fsdp
    from torchtitan.protocols.train_spec import get_train_spec

    args = model_args(work)

    class VocabOnlyTokenizer(BaseTokenizer):
        def encode(self, *_: object, **__: object) -> list[int]:
            raise NotImplementedError("the benchmark feeds token ids")

        def decode(self, *_: object, **__: object) -> str:
            raise NotImplementedError("the benchmark feeds token ids")

        def get_vocab_size(self) -> int:
            return args.vocab_size

    class RandomTokens(BaseDataLoader):
        def __init__(self, dp_rank: int) -> None:
            self.generator = torch.Generator().manual_seed(1000 + dp_rank)

        def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
            while True:
                tokens = torch.randint(0, 256, (work.batch_size, work.seq_len + 1), generator=self.generator)
                yield {"input": tokens[:, :-1].contiguous()}, tokens[:, 1:].contiguous()

        def state_dict(self) -> dict:
            return {}

        def load_state_dict(self, state_dict: dict) -> None:
            pass

    base = get_train_spec("llama3")

    def parallelize(model: torch.nn.Module, parallel_dims: Any, job_config: Any) -> torch.nn.Module:
        model = base.parallelize_fn(model, parallel_dims, job_config)
        if not parallel_dims.fsdp_enabled:
            training = job_config.training
            apply_fsdp(model, init_device_mesh(work.device, (1,), mesh_dim_names=("fsdp",)),
                       param_dtype=TORCH_DTYPE_MAP[training.mixed_precision_param],
                       reduce_dtype=TORCH_DTYPE_MAP[training.mixed_precision_reduce], pp_enabled=False,
                       reshard_after_forward_policy=job_config.parallelism.fsdp_reshard_after_forward)  # fmt: skip
        return model

    return dataclasses.replace(
        base,
        model_args={"bench": args},
        parallelize_fn=parallelize,
        build_dataloader_fn=lambda dp_rank, **_: RandomTokens(dp_rank),
        build_tokenizer_fn=lambda job_config: VocabOnlyTokenizer(),
        build_validator_fn=None,
        state_dict_adapter=None,
    )


def job_config(work: Work, dump_folder: str) -> Any:
    from torchtitan.config import JobConfig

    config = JobConfig()
    config.job.dump_folder = dump_folder
    config.model.name, config.model.flavor = NAME, "bench"
    training = config.training
    training.local_batch_size, training.seq_len, training.steps = work.batch_size, work.seq_len, work.steps
    training.dtype, training.mixed_precision_param = "float32", "bfloat16"  # fp32 master weights, bf16 compute
    training.max_norm = 1.0
    config.optimizer.lr, config.optimizer.weight_decay = 1e-5, 0.0  # as ours (bench/gpu_ours_row.py)
    config.lr_scheduler.warmup_steps = 1
    config.activation_checkpoint.mode = "none"
    config.compile.enable, config.compile.backend = work.compile, compile_backend(work)
    config.metrics.log_freq = work.window_steps
    config.checkpoint.enable = False
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_work_arguments(parser)
    parser.add_argument("--result", type=Path, required=True)
    work = work_from(args := parser.parse_args())
    pin_flash_attention()
    from torch.nn.attention import SDPBackend
    from torchtitan.models.attention import ScaledDotProductAttentionWrapper
    from torchtitan.protocols.train_spec import register_train_spec
    from torchtitan.train import Trainer

    ScaledDotProductAttentionWrapper.sdpa_backends = [SDPBackend.FLASH_ATTENTION]
    register_train_spec(NAME, train_spec(work))
    with tempfile.TemporaryDirectory() as dump_folder:
        trainer = Trainer(job_config(work, dump_folder))
        # FSDP2's MixedPrecisionPolicy computes in bf16, as on several GPUs; autocast (torchtitan's choice without
        # FSDP) would cast again.
        trainer.maybe_enable_amp = contextlib.nullcontext()
        model = trainer.model_parts[0]
        windows, seen = Windows(work), {}
        step = trainer.train_step

        def timed_step(data_iterator: Iterator) -> None:
            if windows.steps == work.warmup_steps - 1:  # the last untimed step, compiled by now
                seen["attention"] = attention_operators(lambda: step(data_iterator), work.device)
            else:
                step(data_iterator)
            windows.step_done()

        trainer.train_step = timed_step
        try:
            trainer.train()
        finally:
            trainer.close()
    parameters = sum(p.numel() for p in model.parameters())
    embedding = model.tok_embeddings.weight.numel()
    args_ = model_args(work)
    RowResult(
        trainer="torchtitan 0.2.2",
        compile=work.compile,
        tokens_per_step=work.tokens_per_step * int(os.environ.get("WORLD_SIZE", "1")),
        window_seconds=windows.seconds,
        window_steps=work.window_steps,
        parameters=parameters,
        matmul_parameters=parameters - embedding,
        attention_flops_per_token=attention_flops_per_token(work.layers, args_.dim, work.seq_len),
        peak_memory_bytes=peak_memory_bytes(work.device),
        attention=seen.get("attention", "not read"),
    ).write(args.result)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
