"""S3's request limits and how the run's two clients meet them: the part size of every multipart upload, and retries
that ride out a sustained burst of 503 SlowDown.

S3's limits (Amazon S3 user guide, "Best practices design patterns: optimizing Amazon S3 performance"): at least
PUTS_PER_PREFIX_PER_S PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests per second per partitioned prefix; beyond
that, and while S3 scales a prefix up to a new rate, it answers 503 Slow Down. A save is a burst: every rank writes
its shards at once, each shard a multipart upload of part-sized requests. Fewer, larger parts mean fewer requests for
the same bytes (sizing/s3_requests.py models each shipped stack's rate, docs/job.md), and the connector's prefix
strategy (trainer/base/s3/dcp.py) gives S3 distinct key ranges to split the load over.

Retries. Each client retries a throttled request on its own, with full-jitter exponential backoff: the wait before
retry i (from 0) is uniform in [0, min(scale x 2^i, cap)]:
- the connector's CRT client (every checkpoint shard): scale 500 ms (mountpoint-s3-client 0.14.1, the connector
  1.5.0's, s3_crt_client.rs: backoff_scale_factor 500 ms, ExponentialBackoffJitterMode::Full), cap 20 s (aws-c-io
  exponential_backoff_retry_strategy.c: max_backoff_secs defaults to 20). Its attempts come from S3ClientConfig's
  max_attempts, unless AWS_MAX_ATTEMPTS is set in the environment, which the client reads first.
- boto3 (meta.json, listings, deletes, the model's upload, staging): botocore's standard mode (retries/standard.py
  ExponentialBackoff: a base scale of 1 s for throttling errors, SlowDown among them, cap 20 s). AWS_MAX_ATTEMPTS
  rules here too when set (trainer/base/s3/transfer.py retry_settings).
Both default to few attempts (the connector 10, botocore's standard mode 3). Here each gets the fewest attempts whose
mean total wait reaches THROTTLED_WINDOW_S: a request gives up only after about that long of unbroken 503s.

One limit no setting here reaches: each client's retry token bucket (aws-c-io standard_retry_strategy.c: 500
tokens, 5 per throttled retry, paid back on success; botocore's standard mode keeps the same 500 and 5). A client
whose requests are all throttled for about 100 retries in a row stops retrying, and its save fails; then the durable
tier's rule holds (trainer/checkpoint/durable.py): a step before the last is skipped with a warning, as the fast tier
has it, and the last step's failure fails the run, whose restart writes it again.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024**2
PUTS_PER_PREFIX_PER_S = 3500
# Multipart upload limits (Amazon S3 user guide, "Amazon S3 multipart upload limits").
MAX_PARTS = 10_000
MIN_PART_BYTES = 5 * MIB
MAX_PART_BYTES = 5 * 1024 * MIB
# The part size of every multipart upload the run makes: checkpoint shards (the connector's default is 8 MiB) and the
# model's files (boto3's default is 8 MiB too). A rank's shard of a 70B checkpoint is about 8.6 GB on 128 ranks: 129
# parts of 64 MiB where 8 MiB parts made 1,025, so an eighth of the requests. The largest object it can write,
# MAX_PARTS parts, is 625 GiB. The CRT client holds a part per request in flight in memory, a few hundred MiB a rank.
PART_BYTES = 64 * MIB
# How long of unbroken 503 SlowDown a request rides out, on average, before it fails. S3 documents no time for a
# prefix to scale up; two minutes is long against a save's burst (docs/job.md models each shipped stack's) and short
# against the checkpoint timeout the ranks' collectives wait for (--checkpoint-timeout-minutes, 30 by default).
THROTTLED_WINDOW_S = 120.0


@dataclass(frozen=True)
class Backoff:
    """Full-jitter exponential backoff: the wait before retry i (from 0) is uniform in [0, min(scale x 2^i, cap)]."""

    scale_s: float
    cap_s: float

    def longest_wait_s(self, retry: int) -> float:
        return min(self.scale_s * 2**retry, self.cap_s)

    def mean_total_wait_s(self, attempts: int) -> float:
        """The mean of the waits between `attempts` attempts (attempts - 1 retries)."""
        return sum(self.longest_wait_s(retry) / 2 for retry in range(attempts - 1))

    def attempts_for(self, window_s: float) -> int:
        """The fewest attempts whose mean total wait reaches `window_s`."""
        attempts = 1
        while self.mean_total_wait_s(attempts) < window_s:
            attempts += 1
        return attempts


CONNECTOR_BACKOFF = Backoff(scale_s=0.5, cap_s=20.0)
BOTOCORE_THROTTLING_BACKOFF = Backoff(scale_s=1.0, cap_s=20.0)
CONNECTOR_MAX_ATTEMPTS = CONNECTOR_BACKOFF.attempts_for(THROTTLED_WINDOW_S)
BOTOCORE_MAX_ATTEMPTS = BOTOCORE_THROTTLING_BACKOFF.attempts_for(THROTTLED_WINDOW_S)
