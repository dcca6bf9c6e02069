"""The IAM evaluator the CI documents' tests rely on (tests/ci/iam_eval.py), checked against the rules of the IAM User
Guide ("Policy evaluation logic", "Condition operators", "Multivalued context keys")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ci.iam_eval import allowed


def _policy(condition: dict[str, Any], effect: str = "Allow") -> dict[str, Any]:
    return {"Statement": [{"Effect": effect, "Action": "s3:GetObject", "Resource": "*", "Condition": condition}]}


def test_an_explicit_deny_wins_over_an_allow() -> None:
    policy = {
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3:DeleteBucket", "Resource": "arn:aws:s3:::logs"},
        ]
    }
    assert allowed(policy, "s3:DeleteBucket", "arn:aws:s3:::data")
    assert not allowed(policy, "s3:DeleteBucket", "arn:aws:s3:::logs")
    assert not allowed(policy, "ec2:RunInstances")


def test_actions_match_without_case_and_resources_with_it() -> None:
    policy = {"Statement": [{"Effect": "Allow", "Action": "S3:Get*", "Resource": "arn:aws:s3:::Data/*"}]}
    assert allowed(policy, "s3:getobject", "arn:aws:s3:::Data/x")
    assert not allowed(policy, "s3:GetObject", "arn:aws:s3:::data/x")


@pytest.mark.parametrize(
    "context,expected",
    [({}, False), ({"aws:RequestTag/team": "a"}, True)],
)
def test_null_false_needs_the_key(context: dict[str, str], expected: bool) -> None:
    assert allowed(_policy({"Null": {"aws:RequestTag/team": "false"}}), "s3:GetObject", "*", context) is expected


def test_null_true_needs_the_key_missing() -> None:
    policy = _policy({"Null": {"aws:RequestTag/team": "true"}})
    assert allowed(policy, "s3:GetObject")
    assert not allowed(policy, "s3:GetObject", "*", {"aws:RequestTag/team": "a"})


def test_bool_compares_the_string_forms() -> None:
    policy = _policy({"Bool": {"kms:GrantIsForAWSResource": "true"}})
    assert allowed(policy, "s3:GetObject", "*", {"kms:GrantIsForAWSResource": True})
    assert not allowed(policy, "s3:GetObject", "*", {"kms:GrantIsForAWSResource": "false"})
    assert not allowed(policy, "s3:GetObject")


@pytest.mark.parametrize("days,expected", [(7, True), (29, True), (30, False), (31, False)])
def test_numeric_less_than(days: int, expected: bool) -> None:
    policy = _policy({"NumericLessThan": {"kms:ScheduleKeyDeletionPendingWindowInDays": 30}})
    assert allowed(policy, "s3:GetObject", "*", {"kms:ScheduleKeyDeletionPendingWindowInDays": days}) is expected


def test_a_negated_operator_holds_over_a_missing_key_and_a_positive_one_does_not() -> None:
    assert allowed(_policy({"StringNotEquals": {"iam:AWSServiceName": "x"}}), "s3:GetObject")
    assert not allowed(_policy({"StringEquals": {"iam:AWSServiceName": "x"}}), "s3:GetObject")
    assert not allowed(_policy({"StringNotEquals": {"k": ["x", "y"]}}), "s3:GetObject", "*", {"k": "y"})


def test_arn_not_like_holds_only_when_no_pattern_matches() -> None:
    policy = _policy({"ArnNotLike": {"iam:PolicyARN": ["arn:aws:iam::aws:policy/A", "arn:aws:iam::1:policy/p/*"]}})
    assert not allowed(policy, "s3:GetObject", "*", {"iam:PolicyARN": "arn:aws:iam::1:policy/p/mine"})
    assert allowed(policy, "s3:GetObject", "*", {"iam:PolicyARN": "arn:aws:iam::aws:policy/AdministratorAccess"})


def test_for_all_values_holds_when_every_request_value_is_listed() -> None:
    policy = _policy({"ForAllValues:StringEquals": {"aws:TagKeys": ["stack"]}})
    assert allowed(policy, "s3:GetObject", "*", {"aws:TagKeys": ["stack"]})
    assert not allowed(policy, "s3:GetObject", "*", {"aws:TagKeys": ["stack", "owner"]})
    assert allowed(policy, "s3:GetObject")  # no tag keys in the request: vacuously true


def test_for_any_value_needs_one_listed_value() -> None:
    policy = _policy({"ForAnyValue:StringLike": {"aws:TagKeys": ["kubernetes.io/cluster/*"]}})
    assert allowed(policy, "s3:GetObject", "*", {"aws:TagKeys": ["a", "kubernetes.io/cluster/x"]})
    assert not allowed(policy, "s3:GetObject", "*", {"aws:TagKeys": ["a"]})
    assert not allowed(policy, "s3:GetObject")


def test_every_key_of_a_condition_block_must_hold() -> None:
    policy = _policy({"StringEquals": {"a": "1", "b": "2"}, "Null": {"c": "false"}})
    assert allowed(policy, "s3:GetObject", "*", {"a": "1", "b": "2", "c": "x"})
    assert not allowed(policy, "s3:GetObject", "*", {"a": "1", "b": "2"})
    assert not allowed(policy, "s3:GetObject", "*", {"a": "1", "b": "3", "c": "x"})


@pytest.mark.parametrize(
    "context,expected",
    [({}, True), ({"aws:PrincipalAccount": "111111111111"}, False), ({"aws:PrincipalAccount": "222222222222"}, True)],
)
def test_if_exists_holds_over_a_missing_key_and_is_the_plain_operator_over_a_present_one(
    context: dict[str, str], expected: bool
) -> None:
    policy = _policy({"StringNotEqualsIfExists": {"aws:PrincipalAccount": "111111111111"}})
    assert allowed(policy, "s3:GetObject", "*", context) is expected


@pytest.mark.parametrize("context,expected", [({}, True), ({"k": "false"}, True), ({"k": "true"}, False)])
def test_bool_if_exists(context: dict[str, str], expected: bool) -> None:
    assert allowed(_policy({"BoolIfExists": {"k": "false"}}), "s3:GetObject", "*", context) is expected


def test_null_takes_no_if_exists() -> None:
    with pytest.raises(ValueError, match="Null"):
        allowed(_policy({"NullIfExists": {"k": "true"}}), "s3:GetObject")


def test_an_operator_it_does_not_know_is_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="DateLessThan"):
        allowed(
            _policy({"DateLessThan": {"aws:CurrentTime": "2030-01-01"}}), "s3:GetObject", "*", {"aws:CurrentTime": "x"}
        )
