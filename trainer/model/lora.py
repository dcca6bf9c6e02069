"""LoRA through PEFT under FSDP2: adapters injected on the meta device, before parallelize, beside a frozen base.

- `apply_lora` wraps each target linear layer of the meta model in peft's lora.Linear
  (peft/mapping.py inject_adapter_in_model, which also sets requires_grad False on every other parameter:
  peft/tuners/tuners_utils.py _mark_only_adapters_as_trainable). The base weights, frozen, are cast to the compute
  dtype there: no fp32 master copy, no gradient and no optimizer state for them. The adapters stay fp32 and are
  trained with AdamW (trainer/optim.py takes only parameters that require a gradient).
- FSDP2 puts a layer's frozen base weights and its adapters in one parameter group: it requires one original dtype
  and one reduce dtype among the parameters that require a gradient only (torch/distributed/fsdp/_fully_shard/
  _fsdp_param_group.py FSDPParamGroup._init_mp_dtypes: `trainable_params`), here the fp32 adapters alone; the
  all-gather casts each parameter to the policy's param_dtype, which the frozen weights already are (FSDPParam.
  init_dtype_attrs sets param_dtype None for them: nothing to cast), so every all-gather input has the same dtype
  (_fsdp_collectives.py _get_param_all_gather_inputs); gradients are reduce-scattered for the parameters that
  require one (FSDPParamGroup.post_backward). No group of its own and no cast is needed.
- Adapters are initialised as peft does (peft/tuners/lora/layer.py LoraLayer.reset_lora_parameters with
  init_lora_weights=True: A kaiming-uniform with a=sqrt(5), B zeros), by trainer/model/build.py init_adapters,
  after the base weights are initialised or loaded.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from trainer.base.flags.config import LoraConfig

ADAPTER = "default"
"""peft's adapter name (inject_adapter_in_model's default): it appears in the parameter names, not in the export."""
PEFT_PREFIX = "base_model.model."
"""What PeftModel adds in front of the base model's parameter names, in a saved adapter (peft/peft_model.py)."""


def peft_config(config: LoraConfig, base_model: str | None = None) -> Any:
    """peft's LoraConfig for the trainer's --lora-* flags: no dropout (the trainer's losses stay deterministic
    and the same for any world size), no bias adapters."""
    from peft import LoraConfig as PeftLoraConfig

    return PeftLoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        target_modules=config.target_list(),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_model,
    )


def is_adapter(name: str) -> bool:
    return ".lora_A." in name or ".lora_B." in name


def apply_lora(model: nn.Module, config: LoraConfig, compute_dtype: torch.dtype) -> None:
    """Inject the adapters into the meta model in place; the base, frozen, in the compute dtype."""
    from peft import inject_adapter_in_model

    inject_adapter_in_model(peft_config(config), model, adapter_name=ADAPTER)
    for name, param in model.named_parameters():
        if is_adapter(name):
            param.data = param.data.float()
        else:
            param.requires_grad_(False)
            param.data = param.data.to(compute_dtype)  # on the meta device: only the dtype changes, nothing allocated


def lora_layers(model: nn.Module) -> list[Any]:
    """The peft lora.Linear layers of the model (each wraps a base_layer and holds lora_A, lora_B and scaling)."""
    from peft.tuners.lora import LoraLayer

    return [module for module in model.modules() if isinstance(module, LoraLayer)]


def adapter_init_bound(fan_in: int) -> float:
    """kaiming_uniform_(a=sqrt(5))'s bound (torch/nn/init.py: gain sqrt(2 / (1 + a^2)) x sqrt(3 / fan_in))."""
    gain = math.sqrt(2.0 / (1.0 + 5.0))
    return gain * math.sqrt(3.0 / fan_in)


def merges(model: nn.Module) -> dict[int, tuple[nn.Parameter, nn.Parameter, float]]:
    """id(base weight) -> (A, B, alpha / r) of every adapted layer: its merged weight is W + (alpha / r) B A, as
    peft's lora.Linear computes its output and merges (peft/tuners/lora/layer.py Linear.get_delta_weight)."""
    found = {}
    for layer in lora_layers(model):
        found[id(layer.base_layer.weight)] = (
            layer.lora_A[ADAPTER].weight,
            layer.lora_B[ADAPTER].weight,
            float(layer.scaling[ADAPTER]),
        )
    return found


def adapter_key(name: str) -> str:
    """A parameter's name in a saved PEFT adapter: PeftModel's prefix, without the adapter's name
    (peft/utils/save_and_load.py get_peft_model_state_dict, through BaseTuner._remove_adapter_name_from_key)."""
    return PEFT_PREFIX + name.replace(f".{ADAPTER}.", ".")
