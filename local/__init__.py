"""The local run: a stack's PyTorchJob on this machine, with a real etcd and one torchrun agent per worker replica,
and its fault drills (`python -m local`, `make demo`)."""
