"""The stack's name is a Kubernetes label value (fsdp-eks/stack) and makes the job's name, from which the operator
and JobSet derive pod, Service and Job names that must be DNS labels: the config check refuses a name that breaks
any of their limits, naming the limit and the longest name allowed."""

from __future__ import annotations

import pytest

from stack.checks import longest_stack_name, stack_name_problems
from stack.fields import ConfigError
from stack.files import raw_stack_config, stack_names
from stack.names import DNS_1035_LABEL, JOB_NAME_MAX_LENGTH, job_name
from stack.parse import parse_stack_config

LONGEST = JOB_NAME_MAX_LENGTH - len("fsdp-")  # 35: the job's name is "fsdp-<stack>", at most 40 characters


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_files_name_is_allowed(stack: str) -> None:
    assert stack_name_problems(stack, nodes=16) == []


def test_the_longest_name_allowed_is_the_one_the_job_name_holds_uncut() -> None:
    assert longest_stack_name(nodes=128) == LONGEST
    assert stack_name_problems("s" * LONGEST, nodes=128) == []


def test_a_name_one_longer_is_refused_naming_the_limit_and_the_longest_allowed() -> None:
    (problem,) = stack_name_problems("s" * (LONGEST + 1), nodes=16)
    assert f"the job's name 'fsdp-{'s' * (LONGEST + 1)}' has 41 characters, over 40" in problem
    assert f"expected at most {LONGEST} characters" in problem
    assert "pulumi stack rename" in problem


def test_a_name_longer_than_a_label_value_is_refused_naming_63() -> None:
    problems = stack_name_problems("s" * 64, nodes=None)
    assert problems == [problems[0]]
    assert "a Kubernetes label value has at most 63" in problems[0]
    assert f"expected at most {LONGEST} characters" in problems[0]


@pytest.mark.parametrize("stack", ["-dev", "dev-", "_dev", "dev.", "dev/1", "dev stack", ""])
def test_a_name_that_is_not_a_label_value_is_refused(stack: str) -> None:
    (problem,) = stack_name_problems(stack, nodes=None)
    assert "as a Kubernetes label value must" in problem


@pytest.mark.parametrize("stack", ["p5_16", "P5.16", "a", "x" * LONGEST])
def test_label_values_with_capitals_dots_and_underscores_are_allowed(stack: str) -> None:
    assert stack_name_problems(stack, nodes=16) == []


def test_each_derived_name_is_checked_against_its_own_limit() -> None:
    # At 10^10 nodes the JobSet's last pod "<job>-node-0-<index>-abcde" passes 63 before any other name does.
    (problem,) = stack_name_problems("s" * LONGEST, nodes=10**10)
    assert "the JobSet's last pod" in problem and "over 63" in problem
    assert "worker Service" not in problem
    # At 10^16 the PyTorchJob's last worker Service "<job>-worker-<index>" passes it too.
    (problem,) = stack_name_problems("s" * LONGEST, nodes=10**16)
    assert "the PyTorchJob's last worker Service" in problem


def test_a_stack_without_a_job_is_held_to_the_label_rules_only() -> None:
    assert stack_name_problems("s" * 63, nodes=None) == []


def test_parse_refuses_a_long_stack_name() -> None:
    stack = "team-experiment-llama2-7b-fine-tuning"
    with pytest.raises(ConfigError, match=f"stack name '{stack}'"):
        parse_stack_config(raw_stack_config("dev"), stack)


@pytest.mark.parametrize("stack", [*stack_names(), "P5_16", "a.b", "s" * LONGEST, "x--y", "-odd-"])
def test_the_job_name_is_a_dns_1035_label_within_its_length(stack: str) -> None:
    name = job_name(stack)
    assert DNS_1035_LABEL.fullmatch(name) and len(name) <= JOB_NAME_MAX_LENGTH, name
