"""`python -m ci.stack_exists` against a local HTTP server standing in for Pulumi Cloud's Get Stack: 200 exists, 404
does not, anything else stops the job (an existing stack must never be taken for a new one)."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from ci import stack_exists
from tests.harness.http_stand_in import serving

TOKEN = "pul-test-token"


class PulumiCloud(http.server.BaseHTTPRequestHandler):
    status = 200
    seen: ClassVar[list[tuple[str, str | None, str | None]]] = []

    def do_GET(self) -> None:
        PulumiCloud.seen.append((self.path, self.headers.get("Authorization"), self.headers.get("Accept")))
        self.send_response(PulumiCloud.status)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def cloud() -> Iterator[str]:
    PulumiCloud.seen = []
    with serving(PulumiCloud) as url:
        yield url


def _run(cloud: str, status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    PulumiCloud.status = status
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", TOKEN)
    output = tmp_path / "github_output"
    code = stack_exists.main(["--org", "acme", "--stack", "p5-16", "--api-url", cloud, "--github-output", str(output)])
    return code, output.read_text() if output.exists() else ""


@pytest.mark.parametrize("status,line", [(200, "exists=true\n"), (404, "exists=false\n")])
def test_the_answer_says_whether_the_stack_exists(
    cloud: str, status: int, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(cloud, status, tmp_path, monkeypatch) == (0, line)
    assert PulumiCloud.seen == [("/api/stacks/acme/fsdp-eks/p5-16", f"token {TOKEN}", stack_exists.ACCEPT)]


@pytest.mark.parametrize("status", [401, 403, 500])
def test_any_other_answer_stops_the_job(
    cloud: str, status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(cloud, status, tmp_path, monkeypatch) == (1, "")


def test_without_a_token_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_ACCESS_TOKEN", raising=False)
    with pytest.raises(SystemExit):
        stack_exists.main(["--org", "acme", "--stack", "dev"])


def test_the_project_is_pulumi_yamls() -> None:
    assert stack_exists.project_name() == "fsdp-eks"
    assert (
        stack_exists.stack_url("https://api.pulumi.com/", "a b", "p", "s")
        == "https://api.pulumi.com/api/stacks/a%20b/p/s"
    )
