"""What CI receives from a stack: pulumi/actions turns every stack output into a step output, secrets decrypted
(src/main.ts at v6.6.1: `stack.outputs()` then `core.setOutput` for each), so the stack exports no secret. The
kubeconfig comes from `aws eks update-kubeconfig`, Grafana's password from its Kubernetes Secret."""

from __future__ import annotations

from stack.files import raw_stack_config
from tests.harness.pulumi_program import ProgramRun, run_program

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


def test_an_existing_clusters_kubeconfig_secret_is_not_exported_either() -> None:
    kubeconfig = '{"kind": "Config", "users": [{"name": "ci", "user": {"token": "not-for-ci-logs"}}]}'
    # A multi-node job on an existing cluster names its shared checkpoint claim (docs/aws.md, "An existing cluster").
    job = raw_stack_config("p5-2")["fsdp-eks:job"] | {"checkpointClaim": "shared-checkpoints"}
    run = run_program(
        "p5-2",
        {"fsdp-eks:cluster": {"existing": True}, "fsdp-eks:job": job},
        secrets={"fsdp-eks:kubeconfig": kubeconfig},
    )
    assert run.error is None, run.error
    assert [k for k, v in _exported(run).items() if v == SECRET] == []
    assert not any("not-for-ci-logs" in str(v) for v in run.outputs.values())
