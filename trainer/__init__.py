"""The fsdp-eks FSDP2 trainer, launched as `python -m trainer` (trainer/__main__.py).

Its role folders, lowest first (tests/test_layering.py keeps each from importing a folder above it): base/ (without
torch: the only part the layers above the trainer may import), comms/, data/, launch/, model/, parallel/,
checkpoint/, checks/ and record/. The top level holds the entry points (`__main__.py`, `main.py`, `stage.py`), the
loop (`train.py`), the checks of the flags against the run (`validate.py`; the flags are in base/flags/), and a few
pieces of the loop. Every `__init__.py` holds only its docstring, so importing a module of base/ loads no torch.
docs/trainer.md lists every module.
"""
