"""EKS's calendar judged at preview (stack/kubernetes_support.py): the default in standard support, a version in
extended support told with its dates and price, one past extended support refused."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from stack.config import KUBERNETES_VERSIONS, ClusterConfig, StackConfig
from stack.files import load_stack_config, stack_names
from stack.kubernetes_support import (
    KEY,
    in_standard_support,
    kubernetes_version_problems,
    kubernetes_version_warning,
    today,
)
from stack.versions import EKS_SUPPORT_ENDS

# These tests' today: the day EKS_SUPPORT_ENDS was last read against EKS's calendar (docs/versions.md).
REVIEWED = date(2026, 12, 4)


def _on(version: str, existing: bool = False) -> StackConfig:
    config = load_stack_config("p5-2")
    return dataclasses.replace(
        config, cluster=dataclasses.replace(config.cluster, kubernetes_version=version, existing=existing)
    )


def test_the_default_and_every_shipped_stacks_version_are_in_standard_support_today() -> None:
    assert ClusterConfig().kubernetes_version == KUBERNETES_VERSIONS[-1]
    for day in (REVIEWED, today()):
        assert ClusterConfig().kubernetes_version in in_standard_support(day)
    for stack in stack_names():
        config = load_stack_config(stack)
        assert kubernetes_version_warning(config, today()) is None, stack


def test_the_calendar_holds_the_dates_eks_publishes() -> None:
    assert EKS_SUPPORT_ENDS["1.33"][0] == date(2026, 7, 29)
    assert EKS_SUPPORT_ENDS["1.34"][0] == date(2026, 12, 2)
    for standard_end, extended_end in EKS_SUPPORT_ENDS.values():  # 12 months of extended support after standard
        assert (extended_end.year - standard_end.year, extended_end.month, extended_end.day) == (
            1,
            standard_end.month,
            standard_end.day,
        )
    assert list(EKS_SUPPORT_ENDS) == sorted(EKS_SUPPORT_ENDS, key=lambda v: tuple(map(int, v.split("."))))


@pytest.mark.parametrize("version", ["1.33", "1.34"])
def test_a_version_in_extended_support_is_told_with_its_dates_its_price_and_the_line_that_upgrades(
    version: str,
) -> None:
    standard_end, extended_end = EKS_SUPPORT_ENDS[version]
    warning = kubernetes_version_warning(_on(version), REVIEWED)
    assert warning is not None and warning.startswith(f"{KEY} {version} left EKS standard support on {standard_end}")
    assert f"until {extended_end}" in warning and "$0.60 per cluster-hour instead of $0.10" in warning
    assert warning.endswith(f"pulumi config set --path {KEY} 1.35")
    assert kubernetes_version_problems(_on(version), REVIEWED) == []
    assert kubernetes_version_warning(_on(version), standard_end.replace(day=standard_end.day - 1)) is None


def test_a_version_past_extended_support_is_refused() -> None:
    extended_end = EKS_SUPPORT_ENDS["1.33"][1]
    (problem,) = kubernetes_version_problems(_on("1.33"), extended_end)
    assert problem.startswith(f"{KEY}: '1.33' is not allowed; EKS's extended support for it ended on {extended_end}")
    assert kubernetes_version_warning(_on("1.33"), extended_end) is None


def test_an_existing_clusters_version_is_its_own() -> None:
    day = EKS_SUPPORT_ENDS["1.33"][1]
    assert kubernetes_version_problems(_on("1.33", existing=True), day) == []
    assert kubernetes_version_warning(_on("1.33", existing=True), REVIEWED) is None
