"""Parallelism, kept apart from the model and the loop: the numbers a run derives from its flags and world size
(plan.py), the process groups (distributed.py), the ordered functions that shard the model (parallelize.py), the
embedding sharded by vocabulary rows (embedding.py) and the reduce-scatter for gloo (reduce_scatter.py).

Torch-free at this level: the sizing model imports plan.py, which carries TORCH_FREE (tests/test_layering.py).
"""
