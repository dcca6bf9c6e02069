"""CODEOWNERS covers every file that decides what CI may do: the workflows and what they run and install, the policy
pack and every module it imports (so every fact a policy's outcome depends on), the stack files and every module that
makes an IAM grant, with the last matching rule winning as GitHub reads the file (GitHub docs, "About code owners":
gitignore-style patterns, later lines take precedence)."""

from __future__ import annotations

import re

import pytest

from tests.harness.import_graph import MODULES, reachable
from tests.workflows.workflows import ROOT

CODEOWNERS = ROOT / ".github" / "CODEOWNERS"
OWNER = re.compile(r"^@[\w-]+(/[\w.-]+)?$")
MUST_BE_OWNED = [
    ".github/workflows/pull-request.yml",
    ".github/workflows/deploy.yml",
    ".github/CODEOWNERS",
    ".ci/run",
    "Makefile",
    "__main__.py",
    "Pulumi.yaml",
    "Pulumi.dev.yaml",
    "Pulumi.p5-16.yaml",
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-trainer.txt",
    "requirements.lock",
    "requirements-dev.lock",
    "policy/requirements.txt",
    "policy/requirements.lock",
    "policy/pack.py",
    "policy/PulumiPolicy.yaml",
    "ci/deploy_policy.py",
    "ci/preview_policy.py",
    "ci/github_oidc.py",
    "ci/environment.py",
    "sizing/catalog.py",
    "trainer/base/flags/config.py",
    "stack/job_api.py",
    "stack/names.py",  # the IAM path every role and policy lives under
    "infra/iam.py",
    "infra/iam_scope.py",
    "infra/addons.py",
    "infra/hub_token_access.py",  # the job's Pod Identity role
    "workloads/platform/component.py",
    "tools/preview_comment.py",
    "tools/changed_stacks.py",
]


def rules() -> list[tuple[str, list[str]]]:
    found = []
    for line in CODEOWNERS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            pattern, *owners = line.split()
            found.append((pattern, owners))
    return found


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """An anchored CODEOWNERS pattern as a regex: `*` within one path segment, `**` across segments, a trailing `/`
    or a directory's name owns everything below it."""
    anchored = pattern.lstrip("/")
    directory = anchored.endswith("/")
    body = "".join(
        ".*" if part == "**" else "[^/]*" if part == "*" else re.escape(part)
        for part in re.split(r"(\*\*|\*)", anchored.rstrip("/"))
    )
    return re.compile(f"^{body}/.*$" if directory else f"^{body}(/.*)?$")


def owners_of(path: str) -> list[str]:
    """Owners of the last rule that matches."""
    owners: list[str] = []
    for pattern, rule_owners in rules():
        if pattern_regex(pattern).match(path):
            owners = rule_owners
    return owners


def policy_pack_files() -> list[str]:
    """Every project module the policy pack imports, directly or not: what a policy's outcome is computed from."""
    modules = {m for name in MODULES if name == "policy" or name.startswith("policy.") for m in reachable(name)}
    return sorted(MODULES[m].relative_to(ROOT).as_posix() for m in modules)


@pytest.mark.parametrize("path", MUST_BE_OWNED)
def test_the_path_has_a_code_owner(path: str) -> None:
    assert (ROOT / path).exists(), path
    assert owners_of(path), path


@pytest.mark.parametrize("path", policy_pack_files())
def test_every_module_the_policy_pack_reads_has_a_code_owner(path: str) -> None:
    assert owners_of(path), f"{path} decides a policy's outcome: add it to .github/CODEOWNERS"


def test_the_policy_pack_reads_the_catalog_and_the_trainers_parser() -> None:
    assert {"sizing/catalog.py", "trainer/base/flags/config.py", "stack/job_api.py"} <= set(policy_pack_files())


def test_every_rule_is_anchored_and_names_a_user_or_team() -> None:
    for pattern, owners in rules():
        assert pattern.startswith("/"), pattern
        assert owners and all(OWNER.match(o) for o in owners), (pattern, owners)


def test_every_rule_matches_a_file() -> None:
    files = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    for pattern, _ in rules():
        assert any(pattern_regex(pattern).match(f) for f in files), f"{pattern} owns nothing"


@pytest.mark.parametrize(
    "pattern,path,owned",
    [
        ("/requirements*.lock", "requirements-dev.lock", True),
        ("/requirements*.lock", "policy/requirements.lock", False),  # anchored at the root
        ("/Pulumi.*.yaml", "Pulumi.p5-16.yaml", True),
        ("/Pulumi.*.yaml", "Pulumi.yaml", False),
        ("/workloads/platform/", "workloads/platform/dashboards/gpu.json", True),
        ("/workloads/platform/", "workloads/platformer.py", False),
        ("/infra/iam.py", "infra/iam_scope.py", False),
    ],
)
def test_patterns_match_as_github_reads_them(pattern: str, path: str, owned: bool) -> None:
    assert bool(pattern_regex(pattern).match(path)) is owned


def test_ordinary_code_is_not_gated() -> None:
    assert owners_of("trainer/train.py") == [] and owners_of("local/run.py") == [] and owners_of("bench/x.py") == []


def test_the_job_whose_pods_the_policies_judge_and_whose_role_reads_the_secret_is_gated() -> None:
    for path in ("workloads/job/pod.py", "workloads/job/component.py", "workloads/job/image_source.py"):
        assert owners_of(path) == ["@fsdp-eks/maintainers"], path
