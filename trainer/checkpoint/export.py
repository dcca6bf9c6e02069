"""Export the trained model in Hugging Face format (config.json + safetensors) for serving.

Parameters are gathered one at a time (every rank takes part in each all-gather) and rank 0 writes them in
files of at most MAX_FILE_BYTES, so no rank ever holds more than one file's worth of full tensors.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trainer.dtypes import TORCH_DTYPES
from trainer.env import DistEnv
from trainer.model.build import canonical_name
from trainer.units import GIB

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 4 * GIB


def plan_files(params: list[tuple[str, nn.Parameter]], itemsize: int) -> list[list[tuple[str, nn.Parameter]]]:
    """Group parameters, in order, into files no larger than MAX_FILE_BYTES (a larger tensor gets its own)."""
    files: list[list[tuple[str, nn.Parameter]]] = [[]]
    size = 0
    for name, param in params:
        nbytes = param.numel() * itemsize
        if files[-1] and size + nbytes > MAX_FILE_BYTES:
            files.append([])
            size = 0
        files[-1].append((name, param))
        size += nbytes
    return files


@torch.no_grad()
def export_hf(model: nn.Module, hf_config: Any, directory: str, dtype_name: str, env: DistEnv, tokenizer: Any) -> None:
    from safetensors.torch import save_file

    dtype = TORCH_DTYPES[dtype_name]
    out = Path(directory)
    params = [(canonical_name(name), param) for name, param in model.named_parameters()]
    files = plan_files(params, torch.empty((), dtype=dtype).element_size())
    names = [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
    if len(files) == 1:
        names = ["model.safetensors"]
    weight_map: dict[str, str] = {}
    for file_name, group in zip(names, files, strict=True):
        tensors = {}
        for name, param in group:
            full = param.full_tensor() if isinstance(param, DTensor) else param
            if env.is_leader:
                tensors[name] = full.detach().to(device="cpu", dtype=dtype).contiguous()
                weight_map[name] = file_name
        if env.is_leader:
            out.mkdir(parents=True, exist_ok=True)
            save_file(tensors, str(out / file_name), metadata={"format": "pt"})
    if not env.is_leader:
        return
    if len(files) > 1:
        total = sum(p.numel() for _, p in params) * torch.empty((), dtype=dtype).element_size()
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    hf_config.dtype = dtype
    hf_config.save_pretrained(str(out))
    if hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(str(out))
    log.info("exported the model in Hugging Face format to %s (%s)", out, dtype_name)
