"""The fsdp-eks FSDP2 trainer. Launched as `python -m trainer` (see trainer/__main__.py); its parts are the
subpackages launch/, model/, data/, parallel/ and checkpoint/ (docs/trainer.md lists every module).

This package's top level, like each subpackage's, stays free of torch imports so that the torch-free modules (model
presets, accelerator peaks, metric names, ..., each marked TORCH_FREE = True) can be read by the Pulumi program and the
sizing math.
"""
