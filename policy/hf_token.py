"""The Hugging Face token is in no Kubernetes object: the job's pods read it from AWS Secrets Manager themselves.

The stack names the secret (job.hfTokenSecret); the pods get its name as HF_TOKEN_SECRET and read it through their
Pod Identity role at start (trainer/base/pod/hub_token.py). A token anywhere in an object, as an env `value`, in a
Secret, a ConfigMap, a command or chart values, would be stored in Pulumi's state and shown in the preview a PR
comment holds; a `secretKeyRef` to a Secret would need the token in a Secret, which is in the state too. So:
- no env entry sets a token variable at all (HF_TOKEN comes from the launcher, not the pod spec);
- no string anywhere, a Secret's included, looks like a user token;
- a job (PyTorchJob, or a TrainJob's runtime) whose trainer downloads a gated model names the secret in every
  container that runs the trainer, or its staging step fails on the hub's 401.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from policy.jobs.registry import reader_for
from policy.props import dotted, get, is_unknown, walk
from stack.gated_models import gated_repo
from trainer.base.flags.config import ModelConfig
from trainer.base.pod.hub_token import SECRET_VARIABLE
from trainer.base.pod.staging import TRAINER_MODULE

# The variables huggingface_hub reads a token from (HF_TOKEN; HUGGING_FACE_HUB_TOKEN is its older name).
TOKEN_VARIABLES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "HF_HUB_TOKEN"})
# User access tokens are "hf_" and 34 letters; from 30 on, so a shortened one in a test manifest is caught too.
TOKEN_LITERAL = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
SECRET_TYPES = ("kubernetes:core/v1:Secret",)
CONFIG_MAP_TYPES = ("kubernetes:core/v1:ConfigMap",)
# The trainer's model flag and its default, from the trainer's own config (trainer/base/flags/config.py
# ModelConfig.name).
MODEL_FIELD = next(f for f in dataclasses.fields(ModelConfig) if f.name == "name")
MODEL_FLAG = MODEL_FIELD.metadata["flag"]
DEFAULT_MODEL = MODEL_FIELD.default
# A container whose command is not known at preview: which model it trains cannot be told.
UNKNOWN_MODEL = object()


def token_env(props: Mapping[str, Any]) -> list[str]:
    """Paths of env entries that set a token variable, by a literal `value` or from a Secret or ConfigMap (any
    container, any object: the PyTorchJob's replica templates, a runtime, a Deployment, a chart's values)."""
    found = []
    for path, value in walk(props):
        if not path or path[-1] != "env" or not isinstance(value, Sequence) or isinstance(value, str):
            continue
        for index, entry in enumerate(value):
            if isinstance(entry, Mapping) and entry.get("name") in TOKEN_VARIABLES:
                found.append(f"{dotted((*path, index))} ({entry['name']})")
    return found


def token_literals(props: Mapping[str, Any]) -> list[str]:
    """Paths of strings that contain something shaped like a Hugging Face user token."""
    return [dotted(path) for path, value in walk(props) if isinstance(value, str) and TOKEN_LITERAL.search(value)]


def secret_data_tokens(props: Mapping[str, Any]) -> list[str]:
    """Keys of a Secret's base64 `data` whose decoded value holds a token, or whose name is a token variable's
    (stringData is plain text, which token_literals reads)."""
    data = get(props, "data")
    if not isinstance(data, Mapping):
        return []
    found = []
    for key, value in data.items():
        try:
            decoded = base64.b64decode(value, validate=True).decode() if isinstance(value, str) else ""
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        if key in TOKEN_VARIABLES or TOKEN_LITERAL.search(decoded):
            found.append(f"data.{key}")
    return found


def config_map_token_keys(props: Mapping[str, Any]) -> list[str]:
    data = get(props, "data")
    return [f"data.{key}" for key in data if key in TOKEN_VARIABLES] if isinstance(data, Mapping) else []


def trained_model(container: Mapping[str, Any]) -> str | object | None:
    """The model a container's `python -m trainer` (torchrun or the launcher before it) trains: its --model flag, or
    the trainer's default; None when the container does not run the trainer; UNKNOWN_MODEL when its command is not
    known."""
    parts = [get(container, "command") or [], get(container, "args") or []]
    if any(is_unknown(part) or not isinstance(part, Sequence) or isinstance(part, str) for part in parts):
        return UNKNOWN_MODEL
    words = [*parts[0], *parts[1]]
    if any(not isinstance(word, str) for word in words):  # an unknown word (a pushed value) among them
        return UNKNOWN_MODEL
    starts = [i + 2 for i in range(len(words) - 1) if words[i : i + 2] == ["-m", TRAINER_MODULE]]
    if not starts:
        return None
    flags = words[starts[0] :]
    for index, word in enumerate(flags):
        if word == MODEL_FLAG and index + 1 < len(flags):
            return flags[index + 1]
        if word.startswith(f"{MODEL_FLAG}="):
            return word.split("=", 1)[1]
    return DEFAULT_MODEL


def _names_the_secret(container: Mapping[str, Any]) -> bool:
    env = get(container, "env")
    if not isinstance(env, Sequence) or isinstance(env, str):
        return False
    return any(
        isinstance(e, Mapping) and e.get("name") == SECRET_VARIABLE and isinstance(e.get("value"), str) and e["value"]
        for e in env
    )


def missing_secret_for_gated_model(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Containers that run the trainer on a gated hub model (stack/gated_models.py) without HF_TOKEN_SECRET."""
    reader = reader_for(resource_type)
    if reader is None:
        return []
    problems = []
    for replica in reader.replicas(props):
        for container in replica.containers:
            model = trained_model(container)
            name = get(container, "name")
            if model is UNKNOWN_MODEL:  # fail closed: a model that cannot be told may be a gated one
                if not _names_the_secret(container):
                    problems.append(
                        f"{replica.role} container {name!r}: its command is not known at preview, so whether it "
                        f"trains a gated model without {SECRET_VARIABLE} cannot be told"
                    )
                continue
            repo = gated_repo(model) if isinstance(model, str) else None
            if repo is None or _names_the_secret(container):
                continue
            if is_unknown(get(container, "env")):  # fail closed: what is not known to be set is not set
                problems.append(
                    f"{replica.role} container {name!r} trains {repo}, a gated Hugging Face repository, and its env "
                    f"is not known at preview: {SECRET_VARIABLE} cannot be shown to be set"
                )
                continue
            problems.append(
                f"{replica.role} container {name!r} trains {repo}, a gated Hugging Face "
                f"repository, without {SECRET_VARIABLE}: its staging would fail on the hub's 401; name the Secrets "
                "Manager secret with job.hfTokenSecret"
            )
    return problems


def hf_token_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Every Kubernetes object is checked; the messages name where a token sits, never its value."""
    if not resource_type.startswith("kubernetes:"):
        return []
    problems = [
        f"{where} sets the Hugging Face token in the pod spec; the launcher reads it from Secrets Manager "
        f"({SECRET_VARIABLE}, job.hfTokenSecret)"
        for where in token_env(props)
    ]
    problems += [
        f"{where} contains a Hugging Face token; keep it in AWS Secrets Manager" for where in token_literals(props)
    ]
    if resource_type in SECRET_TYPES:
        problems += [
            f"{where} holds a Hugging Face token in a Kubernetes Secret; keep it in AWS Secrets Manager"
            for where in secret_data_tokens(props)
        ]
    if resource_type in CONFIG_MAP_TYPES:
        problems += [
            f"{where} holds a token in a ConfigMap; keep it in AWS Secrets Manager"
            for where in config_map_token_keys(props)
        ]
    return problems + missing_secret_for_gated_model(resource_type, props)
