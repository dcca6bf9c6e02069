"""moto in the test's own process, with the environment's AWS settings set aside: test credentials, no profile, no
config or credentials file, no endpoint override, so nothing reaches a real account."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SET_ASIDE = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


@contextmanager
def moto_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, region: str) -> Iterator[None]:
    from moto import mock_aws

    for name in SET_ASIDE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", region)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    with mock_aws():
        yield
