"""Checkpoints: the Checkpointer's save and restore (checkpointer.py), the commit of a save in flight (commit.py),
the directory layout and meta.json (layout.py), the load that reads each byte once (load.py), the space check before a
save (space.py), and the final export in Hugging Face format (export.py).

Torch-free at this level: the sizing model imports space.py, which carries TORCH_FREE (tests/test_layering.py).
"""
