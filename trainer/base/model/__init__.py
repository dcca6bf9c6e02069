"""The model's shape without torch: the shapes known by name (presets.py), where a model comes from and its shape
(source.py), and the chunked loss's shape (loss_chunks.py).
"""
