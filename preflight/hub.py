"""Whether the Hugging Face Hub will hand the job its model and data set: they exist, and for a gated repository,
whether the token's account accepted the licence.

Asked through huggingface_hub's HfApi: the model's info (`GET /api/models/<repo>`, whose `gated` is false, "auto" or
"manual") and, for a gated or private one, the token's access (`GET /api/models/<repo>/auth-check`: 403 with
`X-Error-Code: GatedRepo` until the licence is accepted and approved). The token is this machine's (HF_TOKEN, or
`hf auth login`'s file), never the secret's value: the secret must hold a token of the same account. Without it the
staging step fails on the hub's answer, with exit 4, after the nodes are up (stack/gated_models.py).
"""

from __future__ import annotations

from typing import Any

from preflight.findings import Finding, ok, problem
from stack.config import StackConfig
from stack.gated_models import hub_repo
from stack.job_warnings import SYNTHETIC_DATASET
from trainer.base.model.source import looks_like_path
from trainer.base.s3.uri import is_s3_uri

MODEL_CHECK = "model"
DATA_CHECK = "data set"
HUB = "https://huggingface.co"

HubApi = Any  # huggingface_hub.HfApi


def hub_errors() -> tuple[type[BaseException], type[BaseException], type[BaseException]]:
    """(GatedRepoError, RepositoryNotFoundError, any failed hub call), as huggingface_hub raises them."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    return GatedRepoError, RepositoryNotFoundError, HfHubHTTPError


def server_message(error: BaseException) -> str:
    """The hub's own words (its X-Error-Message or error body), else the exception's first line."""
    message = getattr(error, "server_message", None)
    return str(message or str(error).splitlines()[0]).strip()


def access_findings(
    api: HubApi, repo: str, repo_type: str, token: str | None, check: str, secret: str | None
) -> list[Finding]:
    """The repository exists (its public info, asked without a token); if gated or private, the token reaches it."""
    gated_error, missing_error, hub_error = hub_errors()
    kind = "data set" if repo_type == "dataset" else "model"
    page = f"{HUB}/{'datasets/' if repo_type == 'dataset' else ''}{repo}"
    try:
        info = (api.dataset_info if repo_type == "dataset" else api.model_info)(repo, token=False)
        gated = info.gated
    except missing_error:
        if not token:
            return [
                problem(
                    check,
                    f"no {kind} {repo} on the hub, or a private one",
                    f"{page}; for a private one, "
                    f"export HF_TOKEN=<the token {secret or 'job.hfTokenSecret'} holds> and run this again",
                )
            ]
        gated = "private"
    except (hub_error, OSError) as error:
        return [problem(check, f"cannot ask the hub about {repo}: {server_message(error)}", "check the network")]
    if not gated:
        return [ok(check, f"{repo} is on the hub, not gated")]
    if not token:
        return [
            problem(
                check,
                f"{repo} is gated ({gated}); with no Hugging Face token here its licence cannot be checked",
                f"export HF_TOKEN=<the token {secret or 'job.hfTokenSecret'} holds> and run this again",
            )
        ]
    try:
        api.auth_check(repo, repo_type=repo_type, token=token)
    except gated_error as error:
        return [
            problem(
                check,
                f"{repo} is gated and this token's account has no access: {server_message(error)}",
                f"accept the licence at {page} with that account"
                + (" and wait for the approval email (approved by hand)" if gated == "manual" else ""),
            )
        ]
    except missing_error:
        return [problem(check, f"no {kind} {repo} on the hub, or a private one out of this token's reach", page)]
    except (hub_error, OSError) as error:
        return [problem(check, f"{repo}: {server_message(error)}", "HF_TOKEN: a valid token of your account")]
    return [
        ok(
            check,
            f"{repo} ({gated}): this token's account has access; the secret must hold a token of the same account",
        )
    ]


def hub_dataset(dataset: str) -> str | None:
    """The hub data set `job.dataset` names, or None (s3://, a path in the pod, the synthetic data)."""
    if dataset == SYNTHETIC_DATASET or is_s3_uri(dataset) or looks_like_path(dataset):
        return None
    return dataset


def hub_findings(config: StackConfig, api: HubApi, token: str | None) -> list[Finding]:
    """The model (or a preset's tokenizer) and the data sets the job downloads from the hub."""
    job, findings = config.job, []
    if (repo := hub_repo(job.model)) is not None:
        findings += access_findings(api, repo, "model", token, MODEL_CHECK, job.hf_token_secret)
    for dataset in (job.dataset, job.validation.dataset):
        if dataset is not None and (repo := hub_dataset(dataset)) is not None:
            findings += access_findings(api, repo, "dataset", token, DATA_CHECK, job.hf_token_secret)
    return findings
