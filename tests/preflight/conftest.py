"""AWS for the preflight's tests: moto in this process (EC2's real instance type offerings per AZ, Secrets Manager,
S3, STS), and Service Quotas, which moto models for VPC only, through botocore's Stubber, which checks every answer
against the service's own model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from preflight.aws import AwsClients, aws_clients
from tests.harness.moto_in_process import moto_in_process

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[AwsClients]:
    with moto_in_process(monkeypatch, tmp_path, REGION):
        yield aws_clients(REGION)


def service_quota(code: str, name: str, value: float) -> dict[str, Any]:
    """GetServiceQuota's answer, as the Service Quotas API reference gives it for an EC2 vCPU quota."""
    family = "P/OnDemand" if " P " in name else "G/OnDemand"
    return {
        "Quota": {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": name,
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
            "UsageMetric": {
                "MetricNamespace": "AWS/Usage",
                "MetricName": "ResourceCount",
                "MetricDimensions": {
                    "Class": family,
                    "Resource": "vCPU",
                    "Service": "EC2",
                    "Type": "Resource",
                },
                "MetricStatisticRecommendation": "Maximum",
            },
            "QuotaAppliedAtLevel": "ACCOUNT",
        }
    }


def stubbed_quotas(clients: AwsClients, answers: list[tuple[str, dict[str, Any] | str]]) -> Any:
    """`clients` with Service Quotas answering each (operation, answer) in order: a response, or an error code."""
    from boto3.session import Session
    from botocore.stub import Stubber

    quotas = Session(region_name=REGION).client("service-quotas")
    stubber = Stubber(quotas)
    for operation, answer in answers:
        if isinstance(answer, str):
            stubber.add_client_error(operation, service_error_code=answer, service_message=answer, http_status_code=400)
        else:
            stubber.add_response(operation, answer)
    stubber.activate()
    return replace(clients, quotas=quotas), stubber
