"""Checkpoints: the Checkpointer's save and restore (checkpointer.py), the commit of a save in flight (commit.py),
the directory layout and meta.json (layout.py), the load that reads each byte once (load.py), the durable tier in S3
(durable.py, s3_store.py) and its check before any work (durable_preflight.py), and the final export in Hugging Face
format (export.py).
"""
