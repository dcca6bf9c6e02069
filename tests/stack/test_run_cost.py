"""A run's cost at the price a preview read (stack/run_cost.py): every phase billed on every GPU node, each labelled
modelled or assumed, the idle tail what the autoscaler's scale-down time makes it."""

from __future__ import annotations

import dataclasses

import pytest

from stack.config import StackConfig
from stack.files import load_stack_config
from stack.gpu_autoscaling import SCALE_DOWN_UNNEEDED_S
from stack.price_list import SOURCE_PRICE_LIST, PriceQuote
from stack.run_cost import ASSUMED_BRING_UP_S, run_cost, staged_bytes

PRICE = PriceQuote(55.0, SOURCE_PRICE_LIST, "2026-11-28")


def _with(stack: str, **gpu: object) -> StackConfig:
    config = load_stack_config(stack)
    return dataclasses.replace(config, gpu_nodes=dataclasses.replace(config.gpu_nodes, **gpu))


def test_every_phase_is_billed_on_every_node_at_the_quoted_price() -> None:
    config = load_stack_config("p5-2")
    cost = run_cost(config, PRICE)
    per_hour = config.gpu_nodes.count * PRICE.usd_per_hour
    assert cost["usdPerHour"] == per_hour and cost["price"]["asOf"] == "2026-11-28"
    phases = cost["phases"]
    assert phases["bringUp"]["hours"] == pytest.approx(ASSUMED_BRING_UP_S / 3600, abs=1e-3)
    assert phases["idleUntilReleased"]["hours"] == pytest.approx(SCALE_DOWN_UNNEEDED_S / 3600, abs=1e-3)
    assert phases["training"]["hours"] > 0 and phases["bringUp"]["basis"].startswith("assumed")
    for phase in phases.values():
        assert phase["usd"] == pytest.approx(per_hour * phase["hours"], abs=0.5)
    assert cost["totalUsd"] == pytest.approx(sum(p["usd"] for p in phases.values()), abs=0.05) and cost["complete"]


def test_nodes_kept_idle_leave_the_tail_open() -> None:
    cost = run_cost(_with("p5-2", keep_idle_nodes=True), PRICE)
    assert cost["phases"]["idleUntilReleased"]["hours"] is None and not cost["complete"]


def test_a_randomly_initialised_preset_stages_nothing() -> None:
    assert staged_bytes(load_stack_config("dev")) == 0
    assert staged_bytes(load_stack_config("p5-2")) > 10**10  # a 7B model's bf16 weights
