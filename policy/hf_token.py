"""The Hugging Face token reaches pods only through a Kubernetes Secret.

A token written as an env `value` (or pasted into a command, a ConfigMap or chart values) is stored in the object
itself: readable by anyone who may `kubectl get` the PyTorchJob, printed by `kubectl describe`, and kept in
Pulumi's state and in the preview a PR comment shows. A `valueFrom.secretKeyRef` keeps it in the Secret alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from policy.props import dotted, get, walk

# The variables huggingface_hub reads a token from (HF_TOKEN; HUGGING_FACE_HUB_TOKEN is its older name).
TOKEN_VARIABLES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "HF_HUB_TOKEN"})
# User access tokens are "hf_" and 34 letters; from 30 on, so a shortened one in a test manifest is caught too.
TOKEN_LITERAL = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
# Where a token belongs: a Secret's data is what the other objects must point at.
SECRET_TYPES = ("kubernetes:core/v1:Secret",)
CONFIG_MAP_TYPES = ("kubernetes:core/v1:ConfigMap",)


def literal_token_env(props: Mapping[str, Any]) -> list[str]:
    """Paths of env entries that set a token variable with a literal `value` (any container, any object: the
    PyTorchJob's replica templates, a Deployment, a chart's values)."""
    found = []
    for path, value in walk(props):
        if not path or path[-1] != "env" or not isinstance(value, Sequence) or isinstance(value, str):
            continue
        for index, entry in enumerate(value):
            if isinstance(entry, Mapping) and entry.get("name") in TOKEN_VARIABLES and "value" in entry:
                found.append(f"{dotted((*path, index))} ({entry['name']})")
    return found


def token_literals(props: Mapping[str, Any]) -> list[str]:
    """Paths of strings that contain something shaped like a Hugging Face user token."""
    return [dotted(path) for path, value in walk(props) if isinstance(value, str) and TOKEN_LITERAL.search(value)]


def config_map_token_keys(props: Mapping[str, Any]) -> list[str]:
    data = get(props, "data")
    return [f"data.{key}" for key in data if key in TOKEN_VARIABLES] if isinstance(data, Mapping) else []


def hf_token_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every Kubernetes object but a Secret is checked; the messages name where the token sits, never its value."""
    if not resource_type.startswith("kubernetes:") or resource_type in SECRET_TYPES:
        return []
    problems = [
        f"{where} sets the token as a literal value; use valueFrom.secretKeyRef to the token Secret"
        for where in literal_token_env(props)
    ]
    problems += [f"{where} contains a Hugging Face token; keep it in a Secret" for where in token_literals(props)]
    if resource_type in CONFIG_MAP_TYPES:
        problems += [
            f"{where} holds a token in a ConfigMap; keep it in a Secret" for where in config_map_token_keys(props)
        ]
    return problems
