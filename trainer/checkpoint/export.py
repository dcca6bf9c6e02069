"""Export the trained model in Hugging Face format (config.json, generation_config.json, safetensors) for serving.

Parameters are gathered one at a time (every rank takes part in each all-gather) and rank 0 writes them in
files of at most MAX_FILE_BYTES, so no rank ever holds more than one file's worth of full tensors.

The export generates as its base model does: config.json has use_cache on (training builds the model with it off:
nothing is cached in a training forward), and generation_config.json is the base model's own (its sampling
settings and end-of-turn ids), or for a model without one the default transformers derives from the config, with
the ids of the begin- and end-of-text tokens the model was trained with.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trainer.base.flags.config import LoraConfig
from trainer.base.pod.env import DistEnv
from trainer.base.units import GIB
from trainer.checkpoint.layout import PROVENANCE_FILE
from trainer.dtypes import TORCH_DTYPES
from trainer.model.build import canonical_name
from trainer.model.lora import adapter_key, is_adapter, merges, peft_config

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 4 * GIB
ADAPTER_DIRECTORY = "adapter"
"""Under LoRA, the PEFT adapter's subdirectory of the export (the merged model is the export itself)."""
ADAPTER_WEIGHTS = "adapter_model.safetensors"  # peft/utils/constants.py SAFETENSORS_WEIGHTS_NAME
GENERATION_CONFIG = "generation_config.json"  # transformers' GENERATION_CONFIG_NAME (utils/__init__.py)


def generation_config(model_config: Any, base_directory: Path | None, tokenizer: Any) -> Any:
    """What generate() on the export reads: the base model's generation_config.json when it has one, else
    GenerationConfig.from_model_config with the tokenizer's begin- and end-of-text ids (those the data pipeline
    wrote around every record, so the ones the model learnt to emit); the cache on in both."""
    from transformers import GenerationConfig

    if base_directory is not None and (base_directory / GENERATION_CONFIG).is_file():
        generation = GenerationConfig.from_pretrained(str(base_directory))
    else:
        generation = GenerationConfig.from_model_config(model_config)
        for name in ("bos", "eos"):
            token = getattr(tokenizer, f"{name}_id", None)
            if token is not None:
                setattr(generation, f"{name}_token_id", token)
    generation.use_cache = True
    return generation


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
    generation: Any = None,
) -> None:
    """The model in Hugging Face format into `directory`, with `provenance` in PROVENANCE_FILE and `generation` (a
    GenerationConfig, generation_config above; without one, the default for the config) in GENERATION_CONFIG. Under
    LoRA (`lora` given) that is the merged model (each adapted weight W + (alpha / r) B A, computed in fp32 from the
    full tensors, then cast: in bf16 an update smaller than half a unit in the last place of its weight is lost, see
    docs/trainer.md), and the PEFT adapter alone goes into `directory`/adapter (export_adapter), for
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
    config = copy.deepcopy(hf_config)  # the run's own config stays as training built it
    config.dtype = dtype
    config.use_cache = True
    config.save_pretrained(str(out))
    (generation or generation_config(config, None, tokenizer)).save_pretrained(str(out))
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
