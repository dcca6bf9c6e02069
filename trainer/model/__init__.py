"""The model: its creation on the meta device with its weights filled per shard (build.py), the attention it runs
(attention.py), its LoRA adapters (lora.py) and its chunked loss (loss.py).
"""
