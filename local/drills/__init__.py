"""Fault drills for the local run: real faults, injected while the job trains, from the CLI or from tests.

One class per drill (a module each), all listed in `registry.py`, which the CLI offers and the run looks up by name.
A drill fires when its trigger is met: after the first complete checkpoint (the default: the job then has something
to resume from), or once the leader has logged a given step. kill-workers then fires again each time the pod has new
workers; evict-pod fires again once the pod is back; the others fire once. Each job API's local run names the drills
it can take (local/api.py LocalJobApi.drills).
"""
