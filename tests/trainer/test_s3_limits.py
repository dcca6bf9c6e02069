"""The run's S3 clients meet S3's limits (trainer/base/s3/limits.py): one endpoint for both, parts of PART_BYTES,
retries
sized to ride out THROTTLED_WINDOW_S of 503 SlowDown, each rank's shards under a prefix of its own; and, against an S3
API that throttles (tests/harness/s3_server.py), a burst that botocore's default gives up on is ridden out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local.s3 import LocalS3
from tests.harness.s3_server import ThrottlePlan, start_s3, throttle, throttle_count
from trainer.base.s3.dcp import client_config, connector_client, rank_prefixes
from trainer.base.s3.endpoint import endpoint_url
from trainer.base.s3.limits import (
    BOTOCORE_MAX_ATTEMPTS,
    BOTOCORE_THROTTLING_BACKOFF,
    CONNECTOR_BACKOFF,
    CONNECTOR_MAX_ATTEMPTS,
    MAX_PART_BYTES,
    MAX_PARTS,
    MIN_PART_BYTES,
    PART_BYTES,
    THROTTLED_WINDOW_S,
    Backoff,
)
from trainer.base.s3.transfer import client

LOCAL = "http://127.0.0.1:9000"
ELSEWHERE = "http://127.0.0.1:9001"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"AWS_ENDPOINT_URL": LOCAL}, LOCAL),
        ({"AWS_ENDPOINT_URL_S3": LOCAL}, LOCAL),
        ({"AWS_ENDPOINT_URL": ELSEWHERE, "AWS_ENDPOINT_URL_S3": LOCAL}, LOCAL),  # the service's own first
        ({"AWS_ENDPOINT_URL_S3": LOCAL, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, None),
    ],
)
def test_the_endpoint_is_read_as_botocore_reads_it(environ: dict[str, str], expected: str | None) -> None:
    assert endpoint_url(environ) == expected


def test_both_clients_get_the_one_endpoint_and_their_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", LOCAL)
    monkeypatch.setenv("AWS_ENDPOINT_URL", ELSEWHERE)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    boto = client()
    connector = connector_client()
    assert boto.meta.endpoint_url == LOCAL and connector._endpoint == LOCAL
    assert boto.meta.config.retries == {"mode": "standard", "total_max_attempts": BOTOCORE_MAX_ATTEMPTS}
    config = client_config()
    assert (config.max_attempts, config.part_size) == (CONNECTOR_MAX_ATTEMPTS, PART_BYTES)
    assert config.force_path_style  # an endpoint of our own serves buckets by path


def test_aws_max_attempts_in_the_environment_sets_boto3s_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", LOCAL)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    assert client().meta.config.retries == {"mode": "standard", "total_max_attempts": 2}


def test_a_profiles_endpoint_sends_neither_client_elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A shared config file's `services` section names an S3 endpoint (the AWS CLI's configured endpoints); the
    connector never reads it, so boto3 must not either: both go to AWS's own."""
    config = tmp_path / "config"
    config.write_text(f"[default]\nservices = local\n[services local]\ns3 =\n  endpoint_url = {ELSEWHERE}\n")
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session reads the config file once, when made
    configured = boto3.client("s3", aws_access_key_id="local", aws_secret_access_key="local")
    assert configured.meta.endpoint_url == ELSEWHERE  # what boto3 would do on its own
    assert client().meta.endpoint_url == "https://s3.amazonaws.com" and connector_client()._endpoint is None


def test_the_part_size_is_one_s3_allows_and_writes_a_70b_ranks_shard_in_few_parts() -> None:
    assert MIN_PART_BYTES <= PART_BYTES <= MAX_PART_BYTES
    shard = 1.1e12 / 128  # a 70B checkpoint's fp32 weights and AdamW moments, over 128 ranks
    assert -(-shard // PART_BYTES) < 200 and PART_BYTES * MAX_PARTS > 600 * 2**30


def test_each_clients_attempts_ride_out_the_window_and_no_fewer_would() -> None:
    clients = ((CONNECTOR_BACKOFF, CONNECTOR_MAX_ATTEMPTS), (BOTOCORE_THROTTLING_BACKOFF, BOTOCORE_MAX_ATTEMPTS))
    for backoff, attempts in clients:
        assert backoff.mean_total_wait_s(attempts) >= THROTTLED_WINDOW_S
        assert backoff.mean_total_wait_s(attempts - 1) < THROTTLED_WINDOW_S
    assert CONNECTOR_MAX_ATTEMPTS > 10 and BOTOCORE_MAX_ATTEMPTS > 3  # more than either default


def test_full_jitter_backoff_doubles_to_its_cap() -> None:
    backoff = Backoff(scale_s=0.5, cap_s=20.0)
    assert [backoff.longest_wait_s(retry) for retry in range(8)] == [0.5, 1, 2, 4, 8, 16, 20, 20]
    assert backoff.mean_total_wait_s(1) == 0 and backoff.mean_total_wait_s(3) == 0.75


def test_every_rank_of_128_writes_under_a_prefix_of_its_own_spread_evenly_over_the_first_character() -> None:
    strategy = rank_prefixes(128)
    prefixes = [strategy(rank).partition("/")[0] for rank in range(128)]
    assert len(set(prefixes)) == 128
    assert set(Counter(prefix[0] for prefix in prefixes).values()) == {8}  # 16 first characters, 8 ranks each
    assert strategy(5) == "50/__5_"  # the rank's own name below it, as DCP's FileSystemWriter gives it


def test_the_throttle_plan_numbers_writes_into_a_share_and_bursts() -> None:
    plan = ThrottlePlan(every=4, burst_every=10, burst_length=3)
    assert [n for n in range(1, 21) if plan.throttles(n)] == [1, 2, 3, 4, 8, 11, 12, 13, 16, 20]
    assert not any(ThrottlePlan().throttles(n) for n in range(1, 50))


@pytest.fixture(scope="module")
def throttling_s3() -> Iterator[LocalS3]:
    with start_s3() as server:
        server.create_bucket("fsdp-eks-throttled")
        yield server


@pytest.mark.slow
def test_a_burst_botocores_default_gives_up_on_is_ridden_out(
    throttling_s3: LocalS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four 503 SlowDown in a row: botocore's standard mode stops after its 3 attempts; the run's client goes on."""
    for name, value in throttling_s3.client_environment().items():
        monkeypatch.setenv(name, value)
    where = {"endpoint_url": throttling_s3.endpoint, "region_name": throttling_s3.region}
    default = boto3.client("s3", config=Config(retries={"mode": "standard"}), **where)
    throttle(throttling_s3, ThrottlePlan(burst_every=100, burst_length=4))
    with pytest.raises(ClientError) as refused:
        default.put_object(Bucket="fsdp-eks-throttled", Key="a", Body=b"x")
    assert refused.value.response["Error"]["Code"] == "SlowDown"
    throttle(throttling_s3, ThrottlePlan(burst_every=100, burst_length=4))
    client().put_object(Bucket="fsdp-eks-throttled", Key="a", Body=b"x")
    count = throttle_count(throttling_s3)
    assert (count.writes, count.throttled, count.longest_run) == (5, 4, 4)
