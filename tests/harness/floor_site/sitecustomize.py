"""Run at interpreter start when this folder is on PYTHONPATH (tests/harness/floor.py floor_env)."""

from tests.harness.floor import simulate

simulate()
