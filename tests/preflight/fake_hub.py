"""A Hugging Face Hub API on 127.0.0.1 that answers as the hub does, for the endpoints the preflight calls through
huggingface_hub's HfApi: a repository's info (`GET /api/models/<repo>`, `/api/datasets/<repo>`) and a token's
access (`GET /api/<type>s/<repo>/auth-check`).

The answers' shapes, as huggingface_hub (utils/_http.py hf_raise_for_status) reads them and users' reports quote
them: a missing repository is 401 without a token and 404 with one, `X-Error-Code: RepoNotFound`; a gated one's
files are 401 without a token ("... You must have access to it and be authenticated to access it. Please log in.")
and 403 for an account not on its list ("... is restricted and you are not in the authorized list. Visit
https://huggingface.co/<repo> to ask for access."), `X-Error-Code: GatedRepo`; a token the hub does not know is 401
with `X-Error-Message: Invalid credentials in Authorization header`. A gated repository's info is public.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.harness.http_stand_in import serving


@dataclass
class Repo:
    gated: str | bool = False  # "auto", "manual" or False, as the hub's `gated` field
    private: bool = False
    allowed: set[str] = field(default_factory=set)
    """The tokens whose accounts may read it (accepted its licence, or own it)."""


@dataclass
class Hub:
    repos: dict[tuple[str, str], Repo]
    """(type, repo id) -> its settings; type "model" or "dataset"."""
    tokens: set[str]
    """Every token the hub knows."""
    calls: list[str] = field(default_factory=list)


def info(repo_type: str, repo_id: str, repo: Repo) -> dict[str, Any]:
    common = {
        "_id": "66a1b2c3d4e5f60718293a4b",
        "id": repo_id,
        "author": repo_id.split("/")[0],
        "sha": "0e9e39f249a16976918f6564b8830bc894c89659",
        "lastModified": "2024-09-25T17:00:57.000Z",
        "createdAt": "2024-07-14T22:20:15.000Z",
        "private": repo.private,
        "gated": repo.gated,
        "disabled": False,
        "downloads": 1234567,
        "likes": 1500,
        "tags": ["transformers", "safetensors"] if repo_type == "model" else ["format:json"],
        "siblings": [{"rfilename": "config.json"}] if repo_type == "model" else [{"rfilename": "train.json"}],
    }
    if repo_type == "model":
        return common | {"modelId": repo_id, "library_name": "transformers", "pipeline_tag": "text-generation"}
    return common | {"cardData": {"license": "cc-by-nc-sa-4.0"}}


class Handler(BaseHTTPRequestHandler):
    hub: Hub

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, status: int, body: dict[str, Any], code: str | None = None, message: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.hub.calls.append(path)
        parts = path.strip("/").split("/")
        if len(parts) < 4 or parts[0] != "api" or parts[1] not in ("models", "datasets"):
            self.answer(404, {"error": "Not Found"})
            return
        repo_type, repo_id, rest = parts[1][:-1], "/".join(parts[2:4]), parts[4:]
        header = self.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
        if token is not None and token not in self.hub.tokens:
            message = "Invalid credentials in Authorization header"
            self.answer(401, {"error": message}, message=message)
            return
        repo = self.hub.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and token not in repo.allowed):
            message = "Repository not found"
            self.answer(404 if token else 401, {"error": message}, "RepoNotFound", message)
            return
        if rest == ["auth-check"] and repo.gated and token not in repo.allowed:
            if token is None:
                message = (
                    f"Access to {repo_type} {repo_id} is restricted. You must have access to it and be authenticated "
                    "to access it. Please log in."
                )
                self.answer(401, {"error": message}, "GatedRepo", message)
            else:
                message = (
                    f"Access to {repo_type} {repo_id} is restricted and you are not in the authorized list. Visit "
                    f"https://huggingface.co/{repo_id} to ask for access."
                )
                self.answer(403, {"error": message}, "GatedRepo", message)
            return
        self.answer(200, {} if rest == ["auth-check"] else info(repo_type, repo_id, repo))


@contextmanager
def fake_hub(hub: Hub) -> Iterator[str]:
    """The hub's endpoint (http://127.0.0.1:<free port>) while it runs; stopped after."""
    with serving(type("BoundHandler", (Handler,), {"hub": hub})) as url:
        yield url
