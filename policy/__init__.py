"""The fsdp-eks policy pack: checks `pulumi preview --policy-pack policy` runs on every resource of a stack.

Each check is a pure function of plain data (a resource's type and input properties, or a list of resources) in
its own module; `policy/pack.py` is the only module that speaks the pulumi_policy API, and `policy/__main__.py`
serves the pack. Tests call the checks directly, and feed them the resources the real program registers.
"""
