"""The memory model against the trainer: measured peak memory per rank within 15% of the prediction.

The trainer runs for two steps (the second has Adam's moments next to the activations) on CPU in fp32, for every
sharding strategy at 1 and 2 ranks, with the tiny preset and the ~106M-parameter `small` preset, and with tiny on
long micro batches for activation checkpointing. Its metrics file reports `peak_memory_bytes`: the peak RSS of the
busiest rank. The prediction is sizing/memory.py's peak
for that rank plus the runtime baseline, measured by baseline_probe.py as the same trainer process's RSS just
before it builds the model (Python, torch, transformers, the data, gloo).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sizing.trainer_memory.measure import Case, measure_baseline, measure_peak

TOLERANCE = 0.15
STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "NO_SHARD")
CASES = [
    *(Case("tiny", strategy, ranks) for strategy in STRATEGIES for ranks in (1, 2)),
    *(Case("small", strategy, ranks) for strategy in STRATEGIES for ranks in (1, 2)),
    # Activations dominant (tiny's compute is negligible): 64 x 512 tokens, with and without checkpointing.
    *(Case("tiny", "FULL_SHARD", 1, 512, 64, mode) for mode in ("none", "full", "selective")),
]


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> dict[int, int]:
    """Runtime baseline per world size (the same for both presets: the model is only built on the meta device)."""
    workdir = tmp_path_factory.mktemp("baseline")
    return {ranks: measure_baseline(Case("small", "FULL_SHARD", ranks), workdir) for ranks in (1, 2)}


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    CASES,
    ids=lambda c: f"{c.model}-{c.strategy}-{c.ranks}rank-{c.batch_size}x{c.seq_len}-ac_{c.checkpointing}",
)
def test_measured_peak_is_within_15_percent_of_the_prediction(
    case: Case, baselines: dict[int, int], tmp_path: Path
) -> None:
    measured = measure_peak(case, tmp_path)
    predicted = case.predicted(baselines[case.ranks])
    error = (measured - predicted.total) / predicted.total
    breakdown = ", ".join(f"{name} {value / 2**20:.0f}" for name, value in predicted.terms.items() if value)
    assert abs(error) <= TOLERANCE, (
        f"measured {measured / 2**20:.0f} MiB, predicted {predicted.total / 2**20:.0f} MiB ({error:+.1%}) "
        f"at {predicted.moment}: {breakdown} MiB"
    )
