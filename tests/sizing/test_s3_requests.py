"""The S3 requests a checkpoint save sends, modelled (sizing/s3_requests.py), and docs/job.md's table of them for each
shipped stack (stack/s3_save.py, `python -m stack.s3_save`)."""

from __future__ import annotations

import pytest

from sizing.s3_requests import ROUND_TRIP_S, SEQUENTIAL_ROUND_TRIPS, SaveRequests
from stack.paths import PROJECT_ROOT
from stack.s3_save import table
from trainer.base.s3.limits import MIB

GB = 10**9


def test_each_rank_sends_its_parts_and_the_uploads_two_requests() -> None:
    save = SaveRequests(128 * 100 * MIB, ranks=128, ranks_per_node=8, node_gbps=3200, part_bytes=64 * MIB)
    assert save.requests_per_rank == 2 + 2 and save.requests == 128 * 4


def test_a_rank_writes_at_the_connectors_target_unless_its_node_shares_less() -> None:
    fast = SaveRequests(80 * GB, ranks=8, ranks_per_node=8, node_gbps=3200)
    assert fast.rank_bytes_per_s == pytest.approx(10e9 / 8)  # 10 Gbps each: 80 of the node's 3,200
    narrow = SaveRequests(80 * GB, ranks=8, ranks_per_node=8, node_gbps=40)
    assert narrow.rank_bytes_per_s == pytest.approx(5e9 / 8)
    assert narrow.seconds == pytest.approx(2 * fast.seconds)


def test_the_rate_is_the_requests_over_the_save_and_a_small_save_lasts_an_uploads_round_trips() -> None:
    save = SaveRequests(80 * GB, ranks=8, ranks_per_node=8, node_gbps=3200)
    assert save.puts_per_s == pytest.approx(save.requests / save.seconds)
    tiny = SaveRequests(MIB, ranks=1, ranks_per_node=1, node_gbps=20)
    assert tiny.seconds == SEQUENTIAL_ROUND_TRIPS * ROUND_TRIP_S and tiny.prefixes_needed == 1


def test_larger_parts_send_fewer_requests_per_second_for_the_same_save() -> None:
    large = SaveRequests(800 * GB, ranks=128, ranks_per_node=8, node_gbps=3200, part_bytes=64 * MIB)
    small = SaveRequests(800 * GB, ranks=128, ranks_per_node=8, node_gbps=3200, part_bytes=8 * MIB)
    assert large.seconds == small.seconds and small.puts_per_s > 7 * large.puts_per_s
    assert small.prefixes_needed > 1 == large.prefixes_needed


def test_the_docs_table_is_the_models_for_every_shipped_stack() -> None:
    doc = (PROJECT_ROOT / "docs" / "job.md").read_text()
    documented = doc.split("<!-- s3-save-requests -->", 1)[1].strip().split("\n\n", 1)[0]
    assert documented == table()
