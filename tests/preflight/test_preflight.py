"""Every problem at once, each with its fix: a stack that would fail after billing starts in six ways is refused by
the preflight in all six, and `python -m preflight` exits 1 saying so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from preflight.__main__ import main
from preflight.aws import AwsClients
from preflight.checks import Machine, run_checks
from preflight.findings import problems, report
from stack.files import load_stack_config
from tests.preflight.conftest import service_quota, stubbed_quotas
from tests.preflight.fake_hub import Hub, Repo, fake_hub

LLAMA_2 = "meta-llama/Llama-2-7b-hf"
NOT_ACCEPTED = "hf_not_accepted"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    state = Hub(
        repos={("model", LLAMA_2): Repo(gated="manual"), ("dataset", "knkarthick/dialogsum"): Repo()},
        tokens={NOT_ACCEPTED},
    )
    with fake_hub(state) as endpoint:
        yield endpoint


def test_every_problem_is_named_at_once_with_its_fix(aws: AwsClients, hub: str, tmp_path: Path) -> None:
    from huggingface_hub import HfApi

    config = load_stack_config("p4de-16")  # us-east-1a offers no p4de.24xlarge
    config = replace(config, job=replace(config.job, dataset="s3://acme-data/train.jsonl"))
    aws.s3.create_bucket(Bucket="acme-data")  # the data set's object is missing
    clients, _ = stubbed_quotas(aws, [("get_service_quota", service_quota("L-417A185B", "P", 96.0))])
    machine = Machine(tmp_path / "no-docker-login.json", "x86_64", lambda name: f"/usr/bin/{name}", lambda c: 0)
    findings = run_checks(config, clients, HfApi(endpoint=hub), NOT_ACCEPTED, machine)
    found = {finding.check: finding for finding in problems(findings)}
    assert sorted(found) == ["EC2 quota", "GPU AZ", "data set", "image push", "model", "token secret"]
    assert all(finding.fix for finding in found.values())
    assert "16 x p4de.24xlarge need 1536" in found["EC2 quota"].what
    lines = report(findings)
    assert lines[-1] == "6 problems: fix them before pulumi up"


def test_the_command_exits_1_and_prints_each_problem(
    aws: AwsClients, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub)
    # Service Quotas as the service answers (moto models its VPC quotas only), the rest moto's.
    clients, _ = stubbed_quotas(aws, [("get_service_quota", service_quota("L-417A185B", "P", 96.0))])
    monkeypatch.setattr("preflight.__main__.aws_clients", lambda region: clients)
    monkeypatch.setenv("HF_TOKEN", NOT_ACCEPTED)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text("#!/bin/sh\nexit 0\n")
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {}}))
    assert main(["--stack", "p4de-16"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("preflight of stack p4de-16 (us-east-1):")
    for check in ("EC2 quota", "GPU AZ", "token secret", "model", "image push"):
        assert f"PROBLEM  {check}: " in out, check
    assert "OK       data set: knkarthick/dialogsum is on the hub, not gated" in out


def test_a_stack_the_config_model_refuses_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "no-such-stack"]) == 2
    assert "no stack named 'no-such-stack'" in capsys.readouterr().err
