"""The S3 connector's DCP reader of a checkpoint prefix, counting its bytes. A module of its own so that only a load
from S3 imports the connector (trainer/checkpoint/load.py reader)."""

from __future__ import annotations

from trainer.base.s3.dcp import S3Reader
from trainer.checkpoint.counting import Counting


class CountingS3Reader(Counting, S3Reader):
    """The S3 connector's DCP reader of a checkpoint prefix, counting."""
