"""The model: the shapes known by name (presets.py), where a model comes from (source.py), its creation on the
meta device with its weights filled per shard (build.py), and the attention it runs (attention.py).

Torch-free at this level: the sizing model, the stack's checks and the policy pack import presets.py and source.py,
which carry TORCH_FREE (tests/test_layering.py).
"""
