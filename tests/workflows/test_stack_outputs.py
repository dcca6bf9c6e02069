"""What CI receives from a stack: pulumi/actions turns every stack output into a step output, secrets decrypted
(src/main.ts at v6.6.1: `stack.outputs()` then `core.setOutput` for each), so the stack exports no secret. The
kubeconfig comes from `aws eks update-kubeconfig`, Grafana's password from the Secret its chart makes in the cluster."""

from __future__ import annotations

import pytest

from tests.harness.pulumi_program import ProgramRun
from tests.infra.existing_cluster_stack import run_existing_cluster

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

SECRET = "[secret]"  # how the mock runner reports an output marked secret
PLAIN = ".__plain"


def _exported(run: ProgramRun) -> dict:
    return {k: v for k, v in run.outputs.items() if not k.endswith(PLAIN)}


def test_no_stack_exports_a_secret(stack_run: ProgramRun) -> None:
    assert [k for k, v in _exported(stack_run).items() if v == SECRET] == []


def test_neither_the_kubeconfig_nor_grafanas_password_is_an_output(stack_run: ProgramRun) -> None:
    assert not {"kubeconfig", "grafanaPassword"} & set(_exported(stack_run))


def test_next_commands_say_where_both_come_from(stack_run: ProgramRun) -> None:
    commands = stack_run.outputs["nextCommands"]
    assert commands["kubeconfig"].startswith("aws eks update-kubeconfig")
    assert "get secret" in commands["grafanaPassword"]


@pytest.mark.parametrize("preview", ["update", "first"])
def test_a_stack_on_an_existing_cluster_exports_no_secret_and_no_kubeconfig(preview: str) -> None:
    """The cluster is reached by its name: the stack reads no kubeconfig and exports none; CI gets one from
    `aws eks update-kubeconfig` like any other stack's."""
    run = run_existing_cluster(preview)
    assert [k for k, v in _exported(run).items() if v == SECRET] == []
    assert not {"kubeconfig", "grafanaPassword"} & set(_exported(run))
    assert run.outputs["nextCommands"]["kubeconfig"] == (
        f"aws eks update-kubeconfig --region {run.outputs['region']} --name {run.outputs['clusterName']}"
    )
