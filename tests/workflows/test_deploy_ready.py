"""A stack the CI deploy role cannot deploy fails in the deploy workflow's `stack` job, before `create` and `preview`,
with the exact line that fixes it (`python -m ci.deploy_ready`)."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

from ci.deploy_policy import Account
from ci.deploy_ready import (
    CONFIG_PATH,
    boundary_problem,
    deploy_role_entry_problem,
    error_annotation,
    expected_boundary,
    fix_command,
    main,
    runner_problems,
    stack_problems,
)
from stack.files import stack_names
from tests.workflows.test_locks import lock_entries
from tests.workflows.workflows import ROOT, WORKFLOWS, load

DEPLOY = load(WORKFLOWS / "deploy.yml")
ROLE = "arn:aws:iam::123456789012:role/fsdp-eks-ci-deploy"
BOUNDARY = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"
DOCUMENTED = (
    "pulumi config set --path fsdp-eks:cluster.rolePermissionsBoundary "
    "arn:aws:iam::<account>:policy/fsdp-eks-role-boundary"
)


def _with_boundary(value: object) -> dict[str, object]:
    return {"aws:region": "us-east-1", "fsdp-eks:cluster": {"rolePermissionsBoundary": value}}


def _stack_file(root: Path, stack: str, config: dict[str, object]) -> None:
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))


def test_the_line_is_the_one_docs_ci_md_gives() -> None:
    assert fix_command(expected_boundary(None)) == DOCUMENTED
    assert DOCUMENTED in (ROOT / "docs" / "ci.md").read_text()
    assert expected_boundary(ROLE).arn == Account("123456789012").boundary_arn == BOUNDARY


@pytest.mark.parametrize("stack", stack_names())
def test_a_shipped_stack_is_refused_with_the_fix_unless_it_names_the_boundary(stack: str) -> None:
    """Today no shipped stack sets it (the ARN names the team's account), so each fails here, not mid-`up`."""
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    problem = boundary_problem(stack, config, expected_boundary(ROLE))
    sets_it = (config.get("fsdp-eks:cluster") or {}).get("rolePermissionsBoundary") == BOUNDARY
    assert (problem is None) == sets_it
    if problem is not None:
        assert f"pulumi config set --path {CONFIG_PATH} {BOUNDARY}" in problem and f"Pulumi.{stack}.yaml" in problem


@pytest.mark.parametrize(
    "config",
    [
        {"aws:region": "us-east-1"},
        {"fsdp-eks:cluster": {"name": "fsdp-eks-dev"}},
        {"fsdp-eks:cluster": "not a map"},
        _with_boundary(""),
        _with_boundary("arn:aws:iam::123456789012:policy/another-boundary"),
        _with_boundary("arn:aws:iam::999999999999:policy/fsdp-eks-role-boundary"),  # another account
        _with_boundary(["arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"]),
    ],
    ids=["unset", "section without it", "section not a map", "empty", "another policy", "another account", "a list"],
)
def test_anything_but_the_deploy_roles_boundary_is_refused(config: dict[str, object]) -> None:
    assert boundary_problem("dev", config, expected_boundary(ROLE)) is not None


def test_the_deploy_roles_boundary_passes() -> None:
    assert boundary_problem("dev", _with_boundary(BOUNDARY), expected_boundary(ROLE)) is None


def test_without_the_deploy_role_any_accounts_boundary_of_that_name_passes() -> None:
    unknown = expected_boundary(None)
    assert boundary_problem("dev", _with_boundary(BOUNDARY), unknown) is None
    for value in (
        "arn:aws:iam::<account>:policy/fsdp-eks-role-boundary",
        "arn:aws:iam::12345:policy/fsdp-eks-role-boundary",
        "arn:aws:iam::123456789012:policy/other",
    ):
        assert boundary_problem("dev", _with_boundary(value), unknown) is not None, value


def test_a_role_arn_of_another_partition_names_that_partition() -> None:
    expected = expected_boundary("arn:aws-us-gov:iam::123456789012:role/fsdp-eks-ci-deploy")
    assert expected.arn == "arn:aws-us-gov:iam::123456789012:policy/fsdp-eks-role-boundary"
    with pytest.raises(ValueError):
        expected_boundary("arn:aws:iam::123456789012:user/someone")


RUNNER = ["--runner", "codebuild-fsdp-eks-deploy-{0}-{1}", "--runner-cidrs", "203.0.113.16/28"]


def _ci_cluster(**cluster: object) -> dict[str, object]:
    """The cluster section of a stack CI can deploy: the boundary, and the endpoint open to the runner's egress."""
    section = {"rolePermissionsBoundary": BOUNDARY, "endpointPublicAccess": True, "publicAccessCidrs": [RUNNER[3]]}
    return {**section, **cluster}


def _deployable(**cluster: object) -> dict[str, object]:
    return {"aws:region": "us-east-1", "fsdp-eks:cluster": _ci_cluster(**cluster)}


def test_the_tool_exits_non_zero_with_an_annotation_per_problem_and_zero_when_deployable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stack_file(tmp_path, "bare", {"aws:region": "us-east-1"})
    _stack_file(tmp_path, "ready", _deployable())
    assert main(["--stack", "bare", "--deploy-role-arn", ROLE, *RUNNER], root=tmp_path) == 1
    out, err = capsys.readouterr()
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == 2 and all(line.startswith("::error ") for line in lines)  # the boundary, the endpoint
    assert f"{CONFIG_PATH} {BOUNDARY}" in err and "fsdp-eks:cluster.endpointPublicAccess" in err
    assert main(["--stack", "ready", "--deploy-role-arn", ROLE, *RUNNER], root=tmp_path) == 0
    assert main(["--stack", "ready", "--deploy-role-arn", "", *RUNNER], root=tmp_path) == 0
    assert main(["--stack", "ready", "--deploy-role-arn", ROLE], root=tmp_path) == 1  # no runner named
    assert main(["--stack", "missing", *RUNNER], root=tmp_path) == 1  # no stack file: refused, not passed


@pytest.mark.parametrize("runner", ["", "ubuntu-24.04", "ubuntu-latest", "windows-2025", "macos-15"])
def test_a_github_hosted_standard_runner_is_refused(runner: str) -> None:
    (problem,) = runner_problems(runner, ["203.0.113.16/28"])
    assert "DEPLOY_RUNNER" in problem and "fixed" in problem


def test_the_runners_egress_must_be_its_own_addresses() -> None:
    assert runner_problems("fsdp-eks-static-ip", ["203.0.113.16/28", "198.51.100.7/32"]) == []
    assert "DEPLOY_RUNNER_CIDRS is unset" in runner_problems("fsdp-eks-static-ip", [])[0]
    for bad in ("0.0.0.0/0", "not-a-cidr"):
        (problem,) = runner_problems("fsdp-eks-static-ip", [bad])
        assert problem.startswith(f"DEPLOY_RUNNER_CIDRS: {bad!r} is not allowed")


@pytest.mark.parametrize("stack", stack_names())
def test_every_shipped_stack_reaches_the_runner_only_once_its_file_admits_the_runners_egress(
    tmp_path: Path, stack: str
) -> None:
    """The CI route over every shipped stack: as shipped (no address of the team's), CI refuses it with the lines that
    set the boundary and open the endpoint to the runner; with those lines applied it passes."""
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    problems = stack_problems(stack, ROOT, ROLE, RUNNER[1], [RUNNER[3]])
    assert any(f"{CONFIG_PATH} {BOUNDARY}" in p for p in problems)
    (reach,) = [p for p in problems if p.startswith("fsdp-eks:cluster.endpointPublicAccess")]
    assert f"pulumi config set --path 'fsdp-eks:cluster.publicAccessCidrs[0]' {RUNNER[3]}" in reach
    cluster = {**(config.get("fsdp-eks:cluster") or {}), **_ci_cluster()}
    _stack_file(tmp_path, stack, {**config, "fsdp-eks:cluster": cluster})
    assert stack_problems(stack, tmp_path, ROLE, RUNNER[1], [RUNNER[3]]) == []


def test_the_deploy_role_listed_as_an_admin_needs_the_creator_named(tmp_path: Path) -> None:
    _stack_file(tmp_path, "listed", _deployable(adminRoleArns=[ROLE.replace("role/", "role/ci/")]))
    (problem,) = stack_problems("listed", tmp_path, ROLE, RUNNER[1], [RUNNER[3]])
    assert "ResourceInUseException" in problem
    assert f"pulumi config set --path fsdp-eks:cluster.creatorRoleArn {ROLE}" in problem
    _stack_file(tmp_path, "named", _deployable(adminRoleArns=[ROLE], creatorRoleArn=ROLE))
    assert stack_problems("named", tmp_path, ROLE, RUNNER[1], [RUNNER[3]]) == []
    assert deploy_role_entry_problem("listed", _deployable(adminRoleArns=[ROLE]), "") is None  # role unknown


def test_the_annotation_escapes_what_the_runner_would_read_as_a_command() -> None:
    assert error_annotation("50%\r\nnext") == "::error title=Not deployable by CI::50%25%0D%0Anext"


def test_the_stack_job_checks_before_anything_is_created_or_previewed() -> None:
    jobs = DEPLOY["jobs"]
    job = jobs["stack"]
    runs = [s.get("run", "") for s in job["steps"]]
    (check,) = [i for i, run in enumerate(runs) if "python -m ci.deploy_ready" in run]
    (install,) = [i for i, run in enumerate(runs) if "-r requirements.lock" in run]
    (exists,) = [i for i, run in enumerate(runs) if "python -m ci.stack_exists" in run]
    assert install < check < exists
    step = job["steps"][check]
    assert step["env"]["STACK"] == "${{ inputs.stack || vars.DEPLOY_STACK }}"
    assert step["env"]["DEPLOY_ROLE_ARN"] == "${{ vars.AWS_DEPLOY_ROLE_ARN }}"
    assert step["env"]["RUNNER"] == "${{ vars.DEPLOY_RUNNER }}"
    assert step["env"]["RUNNER_CIDRS"] == "${{ vars.DEPLOY_RUNNER_CIDRS }}"
    assert re.search(
        r'--stack "\$STACK" --deploy-role-arn "\$DEPLOY_ROLE_ARN" --runner "\$RUNNER" --runner-cidrs "\$RUNNER_CIDRS"',
        step["run"],
    )
    assert "continue-on-error" not in step and "if" not in step
    # Every job that creates or previews needs the stack job, so its failure stops them.
    for name in ("create", "preview"):
        needs = jobs[name]["needs"]
        assert "stack" in ([needs] if isinstance(needs, str) else needs)
    assert "needs.stack.result == 'success'" in jobs["preview"]["if"]


# Runs the tool as the job does, then prints the top-level name of every module it loaded.
LOADED = """
import sys
from ci.deploy_ready import main
main(["--stack", "dev"])
print("LOADED", " ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


# Modules a library imports only if present, going on without them; the test venv has them through the trainer's
# packages (psutil: accelerate, which peft needs), the stack job does not.
OPTIONAL_IMPORTS = {
    # opentelemetry/sdk/resources/__init__.py (pulumi's tracing): `try: import psutil ... except ImportError: pass`
    "psutil",
}


def test_the_tool_needs_only_what_the_stack_job_installs() -> None:
    """Every third-party module the tool loads comes from a package of requirements.lock, the one install of the
    `stack` job (the test venv has torch and more; the job has not)."""
    result = subprocess.run(
        [sys.executable, "-c", LOADED], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("LOADED ")]
    loaded = set(line.split()[1:])
    own = {path.name for path in ROOT.iterdir() if (path / "__init__.py").is_file()}
    locked, distributions = set(lock_entries("requirements.lock")), packages_distributions()
    stdlib = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    # Leading `_` and cython_runtime: the interpreter's and compiled extensions' own entries (__main__,
    # _cython_3_2_8, setuptools' _distutils_hack), no package's import.
    third = sorted(name for name in loaded - own - stdlib if not name.startswith("_") and name != "cython_runtime")
    assert "yaml" in third  # the stack file's reader: the check sees what it loads
    for name in (name for name in third if name not in OPTIONAL_IMPORTS):
        owners = {canonicalize_name(d) for d in distributions.get(name, [])}
        assert owners & locked, f"the tool loads {name} ({owners or 'no package'}), which requirements.lock lacks"


def test_every_job_that_runs_pulumi_runs_on_the_runner_the_check_judged() -> None:
    """The check judges DEPLOY_RUNNER's egress; the jobs that reach the cluster's API run there, and no other job of
    the deploy needs it."""
    pull_request = load(WORKFLOWS / "pull-request.yml")
    on_runner = "${{ format(vars.DEPLOY_RUNNER, github.run_id, github.run_attempt) }}"
    assert DEPLOY["jobs"]["preview"]["runs-on"] == DEPLOY["jobs"]["up"]["runs-on"] == on_runner
    assert pull_request["jobs"]["preview"]["runs-on"] == on_runner
    for name in ("stack", "create"):
        assert DEPLOY["jobs"][name]["runs-on"] == "ubuntu-24.04", name


def test_the_tool_runs_as_the_workflow_runs_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ci.deploy_ready", "--stack", "dev", "--deploy-role-arn", ROLE, *RUNNER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and f"{CONFIG_PATH} {BOUNDARY}" in result.stderr
