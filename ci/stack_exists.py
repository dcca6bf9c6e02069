"""Whether a stack exists in Pulumi Cloud yet, for the workflows: a pull request previews only stacks that exist (its
token cannot create one), and the deploy workflow creates a new stack in its approved `create` job.

    python -m ci.stack_exists --org ORG --stack dev --github-output "$GITHUB_OUTPUT"

GET /api/stacks/{organization}/{project}/{stack} with `Authorization: token <PULUMI_ACCESS_TOKEN>` (Pulumi Cloud
REST API, Stacks, Get Stack; the API answers 401 to a missing or invalid token): 200 means the stack exists, 404 that
it does not. Any other answer stops the job: reading it as "missing" would send an existing stack to `stack init`.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from stack.paths import PROJECT_ROOT

API_URL = "https://api.pulumi.com"
# Required on every call but a few (Pulumi Cloud REST API, Required Request Headers).
ACCEPT = "application/vnd.pulumi+8"


def project_name(root: Path = PROJECT_ROOT) -> str:
    """The Pulumi project, as Pulumi.yaml names it: the middle part of every stack's `org/project/stack`."""
    return yaml.safe_load((root / "Pulumi.yaml").read_text())["name"]


def stack_url(api_url: str, organization: str, project: str, stack: str) -> str:
    parts = (urllib.parse.quote(p, safe="") for p in (organization, project, stack))
    return f"{api_url.rstrip('/')}/api/stacks/" + "/".join(parts)


def exists_from_status(status: int) -> bool:
    if status == 200:
        return True
    if status == 404:
        return False
    raise RuntimeError(f"Pulumi Cloud answered {status}: cannot tell whether the stack exists")


def http_status(url: str, token: str, timeout: float = 30.0) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}", "Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--org", required=True, help="the Pulumi organization")
    parser.add_argument("--stack", required=True, help="the stack's short name (a Pulumi.<stack>.yaml here)")
    parser.add_argument("--api-url", default=os.environ.get("PULUMI_BACKEND_URL") or API_URL)
    parser.add_argument("--github-output", type=Path, help="append exists=true|false here")
    args = parser.parse_args(argv)
    token = os.environ.get("PULUMI_ACCESS_TOKEN", "")
    if not token:
        parser.error("PULUMI_ACCESS_TOKEN is not set")
    url = stack_url(args.api_url, args.org, project_name(), args.stack)
    try:
        exists = exists_from_status(http_status(url, token))
    except RuntimeError as error:
        print(f"{url}: {error}", file=sys.stderr)
        return 1
    line = f"exists={'true' if exists else 'false'}"
    print(line)
    if args.github_output:
        with args.github_output.open("a") as output:
            output.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
