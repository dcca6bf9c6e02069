"""The checkpoints' S3 tier through the Amazon S3 Connector for PyTorch: its DCP writer and reader, connected by the
one endpoint rule (trainer/base/s3/endpoint.py).

    writer = S3Writer(uri, dist.get_world_size(io))  # <uri>/00/__0_0.distcp, <uri>/.metadata
    dcp.save(state, storage_writer=writer, process_group=io)
    dcp.load(state, storage_reader=S3Reader(uri), process_group=io)

The connector's writer and reader build their own S3Client from a region and an S3ClientConfig only
(s3torchconnector/dcp/s3_file_system.py, S3StorageWriter and S3StorageReader `__init__`: `self.fs =
S3FileSystem(region, s3client_config=...)`); the endpoint is a separate S3Client argument (`S3Client(region,
endpoint=...)`, s3torchconnector/_s3client/_s3client.py). So each class here replaces that file system with one whose
client names the endpoint explicitly, rather than trusting the CRT client to find AWS_ENDPOINT_URL itself. S3Client
creates its native client lazily (`S3Client._client`), so the one built and dropped by the parent costs nothing.

Written for a burst from many ranks (trainer/base/s3/limits.py): parts of PART_BYTES, CONNECTOR_MAX_ATTEMPTS attempts
per request, and the connector's HexPrefixStrategy, which puts each rank's shards under a prefix of their own,
`<uri>/<rank's index in base 16, digits reversed>/__<rank>_<n>.distcp` (s3torchconnector/dcp/s3_prefix_strategy.py;
the connector's README, "S3 Prefix Strategies for Distributed Checkpointing": to prevent 503 Slow Down when many
ranks write at once). Reversed, the fastest-changing digit comes first: the ranks' keys part right after
`step_<N>/`, evenly over 16 first characters, where S3 can split a partition (the default `__<rank>_` names put 39
of 128 ranks under `__1`). DCP's `.metadata` names each shard's path below `<uri>`, so the reader needs no strategy.
"""

from __future__ import annotations

from s3torchconnector import S3ClientConfig
from s3torchconnector._s3client import S3Client
from s3torchconnector.dcp import HexPrefixStrategy, S3FileSystem, S3StorageReader, S3StorageWriter

from trainer.base.s3.endpoint import endpoint_url, force_path_style, region
from trainer.base.s3.limits import CONNECTOR_MAX_ATTEMPTS, PART_BYTES
from trainer.base.s3.uri import S3Uri

# Hex digits per rank prefix: 2 tell 256 ranks apart; the strategy adds digits for more.
PREFIX_DIGITS = 2


def client_config() -> S3ClientConfig:
    return S3ClientConfig(
        force_path_style=force_path_style(), part_size=PART_BYTES, max_attempts=CONNECTOR_MAX_ATTEMPTS
    )


def rank_prefixes(writers: int) -> HexPrefixStrategy:
    """The connector's strategy with a prefix for each of the save's `writers` ranks (its process group's size; the
    strategy would otherwise count the default group's)."""
    return HexPrefixStrategy(min_prefix_length=PREFIX_DIGITS, prefix_count=writers)


def connector_client() -> S3Client:
    """The CRT client every checkpoint shard is written and read with (the preflight writes through it too)."""
    return S3Client(region(), endpoint=endpoint_url(), s3client_config=client_config())


class S3Writer(S3StorageWriter):
    """DCP's writer to the checkpoint prefix `uri`, for a save by `writers` ranks: `.metadata` directly below it, each
    rank's shards under its own prefix."""

    def __init__(self, uri: S3Uri, writers: int, thread_count: int = 1) -> None:
        super().__init__(
            region(),
            str(uri),
            s3client_config=client_config(),
            prefix_strategy=rank_prefixes(writers),
            thread_count=thread_count,
        )
        self.fs = S3FileSystem(region(), s3_client=connector_client())


class S3Reader(S3StorageReader):
    """DCP's reader of the checkpoint prefix `uri`, with the connector's default DCP-optimised ranged reads."""

    def __init__(self, uri: S3Uri) -> None:
        super().__init__(region(), str(uri), s3client_config=client_config())
        self.fs = S3FileSystem(region(), s3_client=connector_client(), reader_constructor=self._reader_constructor)


def exists(uri: S3Uri) -> bool:
    """Whether the object `uri` exists, asked as DCP asks before every save (FileSystemWriter.prepare_local_plan ->
    S3FileSystem.exists: a HEAD through the connector's client; "not found" is False, any other answer raised)."""
    return S3FileSystem(region(), s3_client=connector_client()).exists(str(uri))
