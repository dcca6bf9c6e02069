"""The local run: a stack's job on this machine as its job API's controllers would run it, one torchrun agent per pod,
and its fault drills (`python -m local`, `make demo`). One folder per job API (pytorchjob/, trainjob/) behind api.py."""
