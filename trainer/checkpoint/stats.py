"""What the checkpoints cost, for the metrics: the latest save to each tier and the load at start."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckpointStats:
    """The latest save and the load at start, for the metrics (None until there is one). Rank 0's: it commits."""

    save_s: float | None = None
    """Wall time of the last committed save, from its start to its commit (asynchronous: mostly in the background)."""
    blocked_s: float | None = None
    """Time the last save kept training waiting (synchronous: all of it; asynchronous: the copy to host memory)."""
    bytes: int | None = None
    """Bytes of the last checkpoint (all ranks together), as `checkpoint_bytes` counts them."""
    load_s: float | None = None
    read_bytes: int | None = None
    """Bytes the load at start read from the checkpoint files, all ranks together."""
    s3_save_s: float | None = None
    """Wall time of the last committed save to S3 (--artifacts-uri), from the start of the save to its meta.json."""
    s3_bytes: int | None = None
    """Bytes of the last checkpoint committed to S3, counted as `bytes`."""
    s3_failed_saves: int = 0
    """Saves to S3 that failed in this run (training went on: the copy in --checkpoint-dir is intact)."""
