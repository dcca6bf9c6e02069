"""Parallelism, kept apart from the model and the loop: the ordered functions that shard the model (parallelize.py),
the embedding sharded by vocabulary rows (embedding.py) and HYBRID_SHARD's all-reduce in bf16 (all_reduce.py).
"""
