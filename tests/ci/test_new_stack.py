"""`python -m ci.new_stack`: a new stack's name added to deploy.yml's dispatch list (the test that the list equals the
stack files would fail otherwise), and the rest of what CI needs for it printed with this stack's values."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ci.deploy_policy import Account
from ci.new_stack import DEPLOY_WORKFLOW, add_to_dispatch, checklist, dispatch_options, main
from stack.files import load_stack_config, stack_names
from stack.paths import PROJECT_ROOT

ACCOUNT = Account("123456789012")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The stack files and deploy.yml, copied, with a new stack's file beside them."""
    (tmp_path / DEPLOY_WORKFLOW).parent.mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / DEPLOY_WORKFLOW, tmp_path / DEPLOY_WORKFLOW)
    for stack in stack_names():
        shutil.copy(PROJECT_ROOT / f"Pulumi.{stack}.yaml", tmp_path)
    shutil.copy(PROJECT_ROOT / "Pulumi.p5-2.yaml", tmp_path / "Pulumi.my-run.yaml")
    return tmp_path


def test_the_new_stack_joins_the_dispatch_list_and_nothing_else_changes(project: Path) -> None:
    before = (project / DEPLOY_WORKFLOW).read_text()
    assert add_to_dispatch(project).startswith("done: ")
    after = (project / DEPLOY_WORKFLOW).read_text()
    assert dispatch_options(after) == stack_names(project) and "my-run" in stack_names(project)
    changed = [(old, new) for old, new in zip(before.splitlines(), after.splitlines(), strict=True) if old != new]
    assert len(changed) == 1 and "options: [" in changed[0][1]


def test_a_list_already_right_is_left_as_it_is(project: Path) -> None:
    add_to_dispatch(project)
    text = (project / DEPLOY_WORKFLOW).read_text()
    assert add_to_dispatch(project).startswith("done already: ")
    assert (project / DEPLOY_WORKFLOW).read_text() == text


def test_the_checklist_names_this_stacks_boundary_creator_secret_and_access_entry() -> None:
    lines = checklist(load_stack_config("p5-2"), ACCOUNT, "acme", "done")
    boundary = "arn:aws:iam::123456789012:policy/fsdp-eks-role-boundary"
    assert f"pulumi config set --stack p5-2 --path fsdp-eks:cluster.rolePermissionsBoundary {boundary}" in lines
    deploy_role = "arn:aws:iam::123456789012:role/fsdp-eks-ci-deploy"
    assert any(
        line.startswith(f"pulumi config set --stack p5-2 --path fsdp-eks:cluster.creatorRoleArn {deploy_role}")
        for line in lines
    )
    assert any("create-secret --region us-east-1 --name fsdp-eks/hf-token" in line for line in lines)
    preview_role = "arn:aws:iam::123456789012:role/fsdp-eks-ci-preview"
    where = f"--region us-east-1 --cluster-name fsdp-eks-p5-2 --principal-arn {preview_role}"
    assert f"aws eks create-access-entry {where}" in lines
    assert any(line.startswith(f"aws eks associate-access-policy {where} ") for line in lines)
    assert (
        "# 5. Pulumi Cloud: fsdp-eks-preview reads and fsdp-eks-deploy writes acme/fsdp-eks/p5-2 (their stack "
        "permissions; the deploy workflow's create job makes the stack)" in lines
    )
    assert "gh variable set DEPLOY_STACK --body p5-2" in lines


def test_a_stack_file_with_the_settings_needs_no_line_for_them() -> None:
    config = load_stack_config("p5-2")
    cluster = replace(
        config.cluster,
        role_permissions_boundary=ACCOUNT.boundary_arn,
        creator_role_arn=ACCOUNT.arn("role", ACCOUNT.deploy_role),
    )
    lines = checklist(replace(config, cluster=cluster), ACCOUNT, "acme", "done")
    assert not any(line.startswith("pulumi config set") for line in lines)


def test_input_buckets_outside_the_stacks_own_are_to_be_registered() -> None:
    config = load_stack_config("p5-2")
    job = replace(config.job, dataset="s3://acme-datasets/train.jsonl", model="s3://fsdp-eks-models/llama/")
    lines = checklist(replace(config, job=job), ACCOUNT, "acme", "done")
    assert any("--data-bucket acme-datasets --out build/ci" in line for line in lines)
    assert not any("--data-bucket fsdp-eks-models" in line for line in lines)


def test_an_unknown_stack_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "no-such-stack", "--account-id", "123456789012"]) == 2
    assert "no stack named 'no-such-stack'" in capsys.readouterr().err
