"""Parse a stack's raw config into a StackConfig: every key, then the checks across keys, then whether the job fits
its GPUs and its file system. Every problem is collected and raised as one ConfigError before any resource exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from stack.checks import cross_key_problems
from stack.cluster_checks import cluster_problems
from stack.config import REGION, SECTIONS, StackConfig
from stack.fields import NAMESPACE, ConfigError, decode_object, parse_section
from stack.fit import fit_problems
from stack.gated_models import hf_token_problems
from stack.hub_token_secret import MOVED_KEYS, secret_region_problems
from stack.kubernetes_support import kubernetes_version_problems, today


def parse_stack_config(raw: Mapping[str, Any], stack: str, *, secrets_visible: bool = False) -> StackConfig:
    """Validate a stack's raw config: keys as the engine names them ("fsdp-eks:gpuNodes", "aws:region"),
    object values as maps or JSON strings. Raises ConfigError listing every problem.

    The stack has no secret keys: the Hugging Face token lives in AWS Secrets Manager (job.hfTokenSecret names it)
    and an existing cluster is reached by its name. A former secret key still set (fsdp-eks:hfToken,
    fsdp-eks:kubeconfig) is refused, wherever the config is read, with where it moved.

    `secrets_visible`: the engine reads the config (stack/pulumi_config.py), so the job is about to run on AWS.
    Only then is a gated model without job.hfTokenSecret refused: the render CLI, the local run (which passes this
    machine's HF_TOKEN through, local/launch.py) and the CI summary read stack files without needing the secret."""
    moved = MOVED_KEYS.keys() & raw.keys()
    problems = [MOVED_KEYS[key] for key in sorted(moved)]
    known = {f"{NAMESPACE}:{name}" for name in SECTIONS}
    for key in sorted(raw):
        if key.startswith(f"{NAMESPACE}:") and key not in known | moved:
            allowed = ", ".join(sorted(k.split(":", 1)[1] for k in known))
            problems.append(f"{key}: unknown key; allowed keys are {allowed}")
    region = raw.get("aws:region")
    if not isinstance(region, str) or not REGION.match(region):
        problems.append(f"aws:region: {region!r} is not allowed; expected an AWS region name such as us-east-1")
        region = "us-east-1"  # keep checking the rest against a well-formed region
    sections = {
        name: parse_section(cls, name, decode_object(name, raw.get(f"{NAMESPACE}:{name}"), problems), problems)
        for name, cls in SECTIONS.items()
    }
    cluster, storage = sections["cluster"], sections["storage"]
    if storage.fsx is None:  # the default depends on the cluster: an existing cluster gets no FSx from the stack
        storage = dataclasses.replace(storage, fsx=not cluster.existing)
    config = StackConfig(
        stack=stack,
        region=region,
        network=sections["network"],
        cluster=cluster,
        gpu_nodes=sections["gpuNodes"],
        storage=storage,
        monitoring=sections["monitoring"],
        job=sections["job"],
        artifacts=sections["artifacts"],
    )
    # Cross-key checks run on what parsed: a value rejected above fell back to its default, so they stay sound.
    problems += cross_key_problems(config)
    problems += cluster_problems(config)  # node group name prefixes, who may reach the API (stack/cluster_checks.py)
    problems += kubernetes_version_problems(config, today())  # EKS's calendar (stack/kubernetes_support.py)
    if config.job.enabled:
        problems += secret_region_problems(config.job.hf_token_secret, config.region)
    if secrets_visible and config.job.enabled:
        problems += hf_token_problems(config.job.model, config.job.hf_token_secret)
    problems += [] if problems else fit_problems(config)  # memory per GPU, once the rest is sound (stack/fit.py)
    if problems:
        raise ConfigError(problems)
    return config
