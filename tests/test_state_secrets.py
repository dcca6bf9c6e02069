"""Nothing worth stealing reaches a stack's state, on any stack.

Whoever can read a stack's state (`pulumi stack export`, or Stack Read in Pulumi Cloud, which any same-repository pull
request's preview token has) can read every input and output of every resource and every stack output, secrets
included: Pulumi encrypts them with the stack's key and gives them back to anyone who may decrypt. So the program
keeps every credential out of the state instead of marking it secret:

- the Hugging Face token lives in AWS Secrets Manager; the stack names the secret and the pods read it with their own
  Pod Identity role (infra/hub_token_access.py, trainer/base/pod/hub_token.py);
- Grafana's admin password is made by the chart in the cluster (workloads/platform/monitoring.py);
- an existing cluster is reached from its name and the caller's AWS identity: the kubeconfig runs
  `aws eks get-token` (infra/existing_cluster.py);
- the image push logs in to ECR on the runner, not through a token the program fetches (workloads/job/image.py).

The program runs under the mocks for every shipped stack, as an existing stack's preview and as a new stack's first
one, plus the variants no shipped stack covers (an existing cluster, the TrainJob API, Grafana behind a load
balancer), and every registered input and output, every data source it calls and every stack output is scanned: for
values marked secret, for the former secrets' resources and fields, for credential-shaped strings, and for probe
values planted where a careless program would pick them up (the deployer's environment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from stack.files import raw_stack_config, stack_names
from tests.harness import pulumi_program
from tests.harness.mock_runner import UNKNOWN_MARKER
from tests.harness.pulumi_program import (
    ProgramRun,
    Registered,
    engine_config,
    run_program,
    with_deployers_address,
)

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks

# The Python SDK's wire form of a secret: a map with this signature key and value (pulumi/runtime/rpc.py
# _special_sig_key, _special_secret_sig). The mock runner keeps it in the recorded inputs as the engine receives them.
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"

# Credential shapes: Hugging Face user access tokens ("hf_" and 34 letters), AWS access key ids, PEM private keys,
# a Docker config's base64 "auths" entry, and Kubernetes bearer tokens (service-account JWTs start "eyJ").
CREDENTIAL_PATTERNS = {
    "Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{20,}"),
    "AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "JWT": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\."),
}
# Field names that carry a credential wherever they appear with a literal value.
CREDENTIAL_FIELDS = {"password", "adminPassword", "token", "client-key-data", "secret_access_key", "auths"}

# Resource types and data sources that only ever held a former secret.
FORMER_SECRET_TYPES = {
    "random:index/randomPassword:RandomPassword": "Grafana's admin password",
    "kubernetes:core/v1:Secret": "the Hugging Face token's or Grafana's admin Secret",
}
FORMER_SECRET_INVOKES = {"aws:ecr/getAuthorizationToken:getAuthorizationToken": "the deploy role's ECR login"}
FORMER_SECRET_KEYS = ("fsdp-eks:hfToken", "fsdp-eks:kubeconfig")

# Planted in the deployer's environment (the shell `pulumi up` runs in) for the probe runs: a program that copied
# any of them into a resource or an output would show it here.
PROBES = {
    "HF_TOKEN": "hf_ProbeTokenThatMustNeverReachTheState01",
    "HUGGING_FACE_HUB_TOKEN": "hf_ProbeHubTokenThatMustNeverReachTheSt02",
    "AWS_ACCESS_KEY_ID": "AKIAPROBEPROBEPROBE7",
    "AWS_SECRET_ACCESS_KEY": "probe/secret/access/key/that/must/not/leak",
    "AWS_SESSION_TOKEN": "probe-session-token-that-must-not-leak",
    "GRAFANA_ADMIN_PASSWORD": "probe-grafana-password-that-must-not-leak",
}


def variants() -> dict[str, tuple[str, dict[str, Any]]]:
    """Configurations no shipped stack file has, as (stack file, replaced keys)."""
    p5_2 = raw_stack_config("p5-2")
    dev = raw_stack_config("dev")
    return {
        "existing-cluster": (
            "p5-2",
            {
                "fsdp-eks:cluster": {"existing": True, "name": "team-gpu-cluster"},
                "fsdp-eks:job": p5_2["fsdp-eks:job"] | {"checkpointClaim": "shared-checkpoints"},
            },
        ),
        "trainjob": ("dev", {"fsdp-eks:job": dev["fsdp-eks:job"] | {"api": "trainjob"}}),
        "grafana-load-balancer": (
            "dev",
            {"fsdp-eks:monitoring": (dev.get("fsdp-eks:monitoring") or {}) | {"grafanaLoadBalancer": True}},
        ),
    }


RUNS = [(stack, {}, preview) for stack in stack_names() for preview in ("update", "first")] + [
    (stack, overrides, "update") for stack, overrides in variants().values()
]
RUN_IDS = [f"{stack}-{preview}" for stack in stack_names() for preview in ("update", "first")] + list(variants())


@pytest.fixture(scope="module", params=range(len(RUNS)), ids=RUN_IDS)
def program_run(request: pytest.FixtureRequest) -> ProgramRun:
    stack, overrides, preview = RUNS[request.param]
    run = run_program(stack, overrides, preview=preview)
    assert run.error is None, run.error
    return run


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) pair of a nested structure, containers included. JSON and YAML documents held as
    strings (policies, kubeconfigs, chart values) are walked into as well."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")
    elif isinstance(value, str) and (value.startswith(("{", "[")) or "\napiVersion:" in value):
        try:
            parsed = yaml.safe_load(value)  # JSON is YAML
        except yaml.YAMLError:
            return
        if isinstance(parsed, dict | list):
            yield from walk(parsed, f"{path}<document>")


def everything(run: ProgramRun) -> Iterator[tuple[str, Any]]:
    """Each resource's inputs and outputs, and every stack output, each under a path that names it."""
    for resource in run.resources:
        yield from walk(resource.inputs, f"{resource.type}::{resource.name} inputs")
        yield from walk(resource.outputs, f"{resource.type}::{resource.name} outputs")
    yield from walk(run.outputs, "stack outputs")


def secret_marked(run: ProgramRun) -> list[str]:
    """Paths of values the program marks secret: a secret in the state is one a state reader can decrypt."""
    found = [
        path for path, value in everything(run) if isinstance(value, dict) and value.get(SECRET_SIG_KEY) == SECRET_SIG
    ]
    found += [f"stack output {name}" for name, value in run.outputs.items() if value == "[secret]"]
    return found


def credential_leaks(run: ProgramRun, probes: dict[str, str] | None = None) -> list[str]:
    leaks = []
    for path, value in everything(run):
        if isinstance(value, str):
            leaks += [f"{path}: {kind}" for kind, pattern in CREDENTIAL_PATTERNS.items() if pattern.search(value)]
            leaks += [f"{path}: the deployer's {name}" for name, probe in (probes or {}).items() if probe in value]
        if isinstance(value, dict):
            leaks += [
                f"{path}.{key}: a literal {key}"
                for key in CREDENTIAL_FIELDS & value.keys()
                if isinstance(value[key], str | dict) and value[key] not in ("", {})
            ]
    return leaks


def test_no_value_is_marked_secret(program_run: ProgramRun) -> None:
    assert secret_marked(program_run) == []


def test_no_credential_is_registered_or_exported(program_run: ProgramRun) -> None:
    assert credential_leaks(program_run) == []


def test_no_resource_or_data_source_of_a_former_secret(program_run: ProgramRun) -> None:
    kinds = [
        f"{r.type} {r.name}: {FORMER_SECRET_TYPES[r.type]}"
        for r in program_run.resources
        if r.type in FORMER_SECRET_TYPES
    ]
    invokes = [f"{i}: {FORMER_SECRET_INVOKES[i]}" for i in program_run.invokes if i in FORMER_SECRET_INVOKES]
    assert kinds + invokes == []


def kubeconfig_users(provider: Registered) -> list[dict[str, Any]]:
    kubeconfig = provider.inputs.get("kubeconfig")
    document = yaml.safe_load(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    assert isinstance(document, dict), f"{provider.name}: kubeconfig is not a document: {kubeconfig!r}"
    return [entry["user"] for entry in document.get("users") or []]


def test_every_kubeconfig_authenticates_with_aws_eks_get_token(program_run: ProgramRun) -> None:
    """A kubeconfig with a token, a client key or a password in it is a standing credential in the state; one that
    runs `aws eks get-token` proves whoever runs Pulumi at the moment, with their own AWS identity."""
    providers = [p for p in program_run.of_type("pulumi:providers:kubernetes") if p.inputs.get("kubeconfig")]
    assert providers, "no Kubernetes provider with a kubeconfig was registered"
    # On a new stack's first preview the created cluster's kubeconfig is not known yet: nothing is in it to check.
    for provider in (p for p in providers if p.inputs["kubeconfig"] != UNKNOWN_MARKER):
        users = kubeconfig_users(provider)
        assert users, provider.name
        for user in users:
            assert set(user) == {"exec"}, f"{provider.name}: the kubeconfig's user has {sorted(user)}"
            command = [user["exec"]["command"], *user["exec"].get("args", [])]
            # pulumi-eks writes `aws --region R eks get-token ...` (generateKubeconfig); ours `aws eks get-token ...`.
            words = [word for word in command if not word.startswith("-")]
            assert command[0] == "aws" and "eks" in words, f"{provider.name}: {command}"
            assert words[words.index("eks") + 1] == "get-token", f"{provider.name}: {command}"


def test_the_image_build_gets_no_registry_password(program_run: ProgramRun) -> None:
    for image in program_run.of_type("docker-build:index:Image"):
        for registry in image.inputs.get("registries") or []:
            assert not registry.get("password"), f"{image.name}: a registry password in the image's inputs"


@pytest.mark.parametrize(("stack", "preview"), [("dev", "update"), ("p5-16", "first")])
def test_nothing_from_the_deployers_environment_reaches_the_state(
    stack: str, preview: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployer's shell may hold a Hugging Face token and AWS keys; none of it may be copied into the state."""
    for name, probe in PROBES.items():
        monkeypatch.setenv(name, probe)
    raw = raw_stack_config(stack)
    raw = with_deployers_address(raw) if preview == "first" else raw
    # Uncached: the probes are in this process's environment, which the cached runs did not see.
    run = pulumi_program._run.__wrapped__(stack, engine_config(raw), json.dumps([]), preview)
    assert run.error is None, run.error
    assert credential_leaks(run, PROBES) == []


@pytest.mark.parametrize("key", FORMER_SECRET_KEYS)
def test_a_former_secret_key_is_refused_before_any_resource(key: str) -> None:
    """A stack file that still carries the token or a kubeconfig is refused, naming where the value goes now,
    before a resource exists: the value never reaches a resource, and the stack file is cleaned up."""
    probe = PROBES["HF_TOKEN"] if key.endswith("hfToken") else "apiVersion: v1\nkind: Config\n"
    run = run_program("dev", {key: probe}, secrets={key: probe})
    assert run.error is not None, f"{key} was accepted"
    assert key.split(":", 1)[1] in str(run.error), run.error
    assert run.resources == []
