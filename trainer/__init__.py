"""The fsdp-eks FSDP2 trainer. Launched as `python -m trainer` (see trainer/__main__.py).

This package's top level stays free of torch imports so that the torch-free parts (model presets,
accelerator peaks, metric names) can be read by the Pulumi program and the sizing math.
"""
