"""The checkpoints' S3 tier through the Amazon S3 Connector for PyTorch: its DCP writer and reader, connected by the
one endpoint rule (trainer/s3/endpoint.py).

    dcp.save(state, storage_writer=S3Writer(uri), process_group=io)   # <uri>/__0_0.distcp, ..., <uri>/.metadata
    dcp.load(state, storage_reader=S3Reader(uri), process_group=io)

The connector's writer and reader build their own S3Client from a region and an S3ClientConfig only
(s3torchconnector/dcp/s3_file_system.py, S3StorageWriter and S3StorageReader `__init__`: `self.fs =
S3FileSystem(region, s3client_config=...)`); the endpoint is a separate S3Client argument (`S3Client(region,
endpoint=...)`, s3torchconnector/_s3client/_s3client.py). So each class here replaces that file system with one whose
client names the endpoint explicitly, rather than trusting the CRT client to find AWS_ENDPOINT_URL itself. S3Client
creates its native client lazily (`S3Client._client`), so the one built and dropped by the parent costs nothing.

The writer's objects carry the same names as DCP's FileSystemWriter (the connector's DefaultPrefixStrategy: `__<rank>_`,
as FileSystemWriter's own `__<rank>_` prefix), so a checkpoint on S3 is laid out as one under --checkpoint-dir.
"""

from __future__ import annotations

from s3torchconnector import S3ClientConfig
from s3torchconnector._s3client import S3Client
from s3torchconnector.dcp import S3FileSystem, S3StorageReader, S3StorageWriter

from trainer.s3.endpoint import endpoint_url, force_path_style, region
from trainer.s3.uri import S3Uri


def client_config() -> S3ClientConfig:
    return S3ClientConfig(force_path_style=force_path_style())


def connector_client() -> S3Client:
    """The CRT client every checkpoint shard is written and read with (the preflight writes through it too)."""
    return S3Client(region(), endpoint=endpoint_url(), s3client_config=client_config())


class S3Writer(S3StorageWriter):
    """DCP's writer to the checkpoint prefix `uri` (its objects directly below it)."""

    def __init__(self, uri: S3Uri, thread_count: int = 1) -> None:
        super().__init__(region(), str(uri), s3client_config=client_config(), thread_count=thread_count)
        self.fs = S3FileSystem(region(), s3_client=connector_client())


class S3Reader(S3StorageReader):
    """DCP's reader of the checkpoint prefix `uri`, with the connector's default DCP-optimised ranged reads."""

    def __init__(self, uri: S3Uri) -> None:
        super().__init__(region(), str(uri), s3client_config=client_config())
        self.fs = S3FileSystem(region(), s3_client=connector_client(), reader_constructor=self._reader_constructor)
