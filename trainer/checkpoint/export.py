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

from trainer.checkpoint.layout import PROVENANCE_FILE
from trainer.config import LoraConfig
from trainer.dtypes import TORCH_DTYPES
from trainer.env import DistEnv
from trainer.model.build import canonical_name
from trainer.model.lora import adapter_key, is_adapter, merges, peft_config
from trainer.units import GIB

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 4 * GIB
ADAPTER_DIRECTORY = "adapter"
"""Under LoRA, the PEFT adapter's subdirectory of the export (the merged model is the export itself)."""
ADAPTER_WEIGHTS = "adapter_model.safetensors"  # peft/utils/constants.py SAFETENSORS_WEIGHTS_NAME


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


def _full(param: torch.Tensor) -> torch.Tensor:
    """The whole tensor on every rank (a collective for a sharded one: every rank calls it)."""
    return param.full_tensor() if isinstance(param, DTensor) else param


@torch.no_grad()
def export_hf(
    model: nn.Module,
    hf_config: Any,
    directory: str,
    dtype_name: str,
    env: DistEnv,
    tokenizer: Any,
    lora: LoraConfig | None = None,
    base_model: str | None = None,
    provenance: dict[str, Any] | None = None,
) -> None:
    """The model in Hugging Face format into `directory`, with `provenance` in PROVENANCE_FILE. Under LoRA (`lora`
    given) that is the merged model (each adapted weight W + (alpha / r) B A, computed in fp32 from the full tensors,
    then cast), and the PEFT adapter alone goes into `directory`/adapter (export_adapter), for
    PeftModel.from_pretrained on the base model."""
    from safetensors.torch import save_file

    dtype = TORCH_DTYPES[dtype_name]
    out = Path(directory)
    merged = merges(model) if lora else {}
    params = [(canonical_name(name), param) for name, param in model.named_parameters() if not is_adapter(name)]
    files = plan_files(params, torch.empty((), dtype=dtype).element_size())
    names = [f"model-{i + 1:05d}-of-{len(files):05d}.safetensors" for i in range(len(files))]
    if len(files) == 1:
        names = ["model.safetensors"]
    weight_map: dict[str, str] = {}
    for file_name, group in zip(names, files, strict=True):
        tensors = {}
        for name, param in group:
            full = _full(param)
            if id(param) in merged:
                a, b, scaling = merged[id(param)]
                full = full.float() + scaling * (_full(b).float() @ _full(a).float())
            if env.is_leader:
                tensors[name] = full.detach().to(device="cpu", dtype=dtype).contiguous()
                weight_map[name] = file_name
        if env.is_leader:
            out.mkdir(parents=True, exist_ok=True)
            save_file(tensors, str(out / file_name), metadata={"format": "pt"})
    if lora:
        export_adapter(model, lora, out / ADAPTER_DIRECTORY, env, base_model)
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
    if provenance is not None:
        (out / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
    log.info("exported the model in Hugging Face format to %s (%s)", out, dtype_name)


@torch.no_grad()
def export_adapter(model: nn.Module, lora: LoraConfig, directory: Path, env: DistEnv, base_model: str | None) -> None:
    """The LoRA adapters as PEFT saves them (PeftModel.save_pretrained): adapter_config.json and
    adapter_model.safetensors, in fp32 as trained (small: r x (in + out) per adapted layer)."""
    from safetensors.torch import save_file

    tensors = {}
    for name, param in model.named_parameters():
        if is_adapter(name):
            full = _full(param)
            if env.is_leader:
                tensors[adapter_key(canonical_name(name))] = full.detach().to(device="cpu").contiguous()
    if not env.is_leader:
        return
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    peft_config(lora, base_model).save_pretrained(str(directory))
    log.info("exported the LoRA adapter in PEFT format to %s", directory)
