"""How many requests a checkpoint save sends S3, and how many per second: a model, not a measurement (docs/job.md's
table, one row per shipped stack, which tests/sizing/test_s3_requests.py keeps equal to it). Pure Python.

A save to the durable tier: every rank writes its share of the checkpoint at once (FULL_SHARD's shards; under
HYBRID_SHARD the replicas split the writing, trainer/base/checkpoint/writers.py, so each rank writes 1/ranks of it too),
one
object per rank, each a multipart upload: CreateMultipartUpload, an UploadPart per PART_BYTES, CompleteMultipartUpload
(trainer/base/s3/limits.py). How fast: each rank's CRT client sizes its connections for its throughput target (10 Gbps,
S3ClientConfig.throughput_target_gbps, the connector's default, which the trainer keeps), and a node's ranks share its
network bandwidth (sizing/catalog.py; traffic to S3 in the Region may use all of it: EC2 user guide, "Amazon EC2
instance network bandwidth"). A save then lasts shard / per-rank rate, but no less than the three round trips an
upload makes one after another (create, parts, complete) at S3's small-object latency, 100 to 200 ms (Amazon S3 user
guide, "Performance guidelines for Amazon S3"; the low end, which gives the higher rate). S3 sees every rank's
requests within it: PUT/s = requests / that time, against PUTS_PER_PREFIX_PER_S per partitioned prefix. A handful
of requests per save (DCP's `.metadata` and its copy, meta.json, the prune's deletes) are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer.base.s3.limits import PART_BYTES, PUTS_PER_PREFIX_PER_S

CONNECTOR_TARGET_GBPS = 10.0  # s3torchconnector 1.5.0 S3ClientConfig.throughput_target_gbps
UPLOAD_REQUESTS = 2  # CreateMultipartUpload and CompleteMultipartUpload around the parts
ROUND_TRIP_S = 0.1
SEQUENTIAL_ROUND_TRIPS = 3
BITS_PER_BYTE = 8


@dataclass(frozen=True)
class SaveRequests:
    """One save of `checkpoint_bytes` by `ranks` ranks, `ranks_per_node` to a node of `node_gbps`."""

    checkpoint_bytes: int
    ranks: int
    ranks_per_node: int
    node_gbps: float
    part_bytes: int = PART_BYTES

    @property
    def shard_bytes(self) -> float:
        return self.checkpoint_bytes / self.ranks

    @property
    def requests_per_rank(self) -> int:
        return math.ceil(self.shard_bytes / self.part_bytes) + UPLOAD_REQUESTS

    @property
    def requests(self) -> int:
        return self.ranks * self.requests_per_rank

    @property
    def rank_bytes_per_s(self) -> float:
        gbps = min(CONNECTOR_TARGET_GBPS, self.node_gbps / self.ranks_per_node)
        return gbps * 1e9 / BITS_PER_BYTE

    @property
    def seconds(self) -> float:
        """How long every rank writes its shard, all at once."""
        return max(self.shard_bytes / self.rank_bytes_per_s, SEQUENTIAL_ROUND_TRIPS * ROUND_TRIP_S)

    @property
    def puts_per_s(self) -> float:
        return self.requests / self.seconds

    @property
    def prefixes_needed(self) -> int:
        """Partitioned prefixes S3 needs to take the rate without a 503."""
        return math.ceil(self.puts_per_s / PUTS_PER_PREFIX_PER_S)
