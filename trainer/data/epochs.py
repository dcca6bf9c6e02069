"""How many passes over the data set a run makes, and when that is too many for fine-tuning."""

from __future__ import annotations

# Beyond this many passes over the data set, a fine-tuning run is almost surely mis-sized: Llama 2's supervised
# fine-tuning ran 2 epochs (Touvron et al. 2023, section 3.1), and small sets overfit long before 10.
MANY_EPOCHS = 10


def epochs(steps: int, global_batch: int, num_samples: int) -> float:
    """Passes over the data set that `steps` optimizer steps of `global_batch` sequences make."""
    return steps * global_batch / num_samples


def epochs_warning(steps: int, global_batch: int, num_samples: int) -> str | None:
    """What to tell a user whose --steps make many passes over a small data set (None when they do not)."""
    passes = epochs(steps, global_batch, num_samples)
    if passes <= MANY_EPOCHS:
        return None
    one_epoch = -(-num_samples // global_batch)
    return (
        f"--steps {steps}: {passes:.0f} epochs of the data set ({num_samples} sequences, {global_batch} per step); "
        f"one epoch is {one_epoch} steps, and fine-tuning usually runs a few"
    )
