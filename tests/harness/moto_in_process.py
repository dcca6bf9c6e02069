"""moto in the test's own process, with the environment's AWS settings set aside: test credentials, no profile, no
config or credentials file, no endpoint override, so nothing reaches a real account.

Every botocore session made inside shares one data loader. A new session otherwise parses the service models
(EC2's is several MB of JSON) and the endpoint table again: most of a test's setup time. botocore's own sessions
already give all their clients one loader and hand them the same parsed models; here the test's sessions do too."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SET_ASIDE = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DATA_PATH")


class _SearchPaths(list[str]):
    """A loader's search paths that take each path once: every boto3 session appends its own data path."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@functools.cache
def shared_loader() -> Any:
    """One botocore data loader for the whole test session (AWS_DATA_PATH is set aside, so its paths are fixed)."""
    from botocore.loaders import create_loader

    loader = create_loader()
    loader._search_paths = _SearchPaths(loader.search_paths)  # pyright: ignore[reportPrivateUsage]
    return loader


def _shared_loader_for(search_path_string: str | None = None) -> Any:
    """botocore.session's create_loader, for the data path these tests leave: none."""
    assert search_path_string is None, search_path_string
    return shared_loader()


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
    monkeypatch.setattr("botocore.session.create_loader", _shared_loader_for)
    with mock_aws():
        yield
