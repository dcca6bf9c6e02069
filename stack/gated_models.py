"""Which job models the staging step can fetch from the Hugging Face Hub only with a token, and the one check that
names the stack's key for it.

Without the token, the pod's staging step (trainer/stage.py) gets the hub's 401 for a gated repository and the job
never starts; `pulumi preview` (and every read of the stack file) refuses such a stack instead. The token lives in
AWS Secrets Manager; the stack names the secret with the plain key job.hfTokenSecret (stack/hub_token_secret.py), and
`hf_token_problems` is the one place that asks for it.

Pure and torch-free: it reads only the model's name, never the network.
"""

from __future__ import annotations

from stack.fields import NAMESPACE
from stack.hub_token_secret import DOCUMENTED_NAME, KEY
from trainer.base.model.presets import PRESETS
from trainer.base.model.source import looks_like_path
from trainer.base.s3.uri import is_s3_uri

# Hub owners whose model repositories are gated: a download needs a token of an account that accepted the licence.
# meta-llama gates every Llama repository behind its licence form (the hub answers 401 "Repo model
# meta-llama/Llama-2-7b-hf is gated. You must be authenticated to access it."); mistralai gated its repositories in
# April 2024, Mistral-7B-v0.1 and the Instruct models included (huggingface/alignment-handbook#166,
# TransformerLensOrg/TransformerLens#769). Gating is a per-repository setting on the hub; these owners apply it to
# all of theirs, which is what a check without network access can know.
GATED_HUB_OWNERS = ("meta-llama", "mistralai")


def hub_repo(model: str) -> str | None:
    """The hub repository the staging step downloads for `job.model`, or None when it downloads none.

    A hub id is fetched itself. A preset is built from random weights, but its tokenizer comes from the preset's
    hub checkpoint (trainer/base/model/source.py ModelSource.default_tokenizer; the stack sets no other tokenizer), so
    llama2-7b needs meta-llama/Llama-2-7b-hf. A path in the image (trainer/base/model/source.py looks_like_path) and a
    preset without a hub id (tiny, small, byte tokenizer) download nothing, and neither does an s3:// model, which
    brings its own tokenizer (trainer/validate.py refuses an s3:// --tokenizer) and is read from S3, never the hub."""
    if is_s3_uri(model):
        return None
    if model in PRESETS:
        return PRESETS[model].hf_id
    if looks_like_path(model):
        return None
    return model


def gated_repo(model: str) -> str | None:
    """The gated hub repository `job.model` needs, or None when it needs none."""
    repo = hub_repo(model)
    if repo is None or repo.split("/", 1)[0].lower() not in GATED_HUB_OWNERS:
        return None
    return repo


def hf_token_problems(model: str, token_secret: str | None) -> list[str]:
    """The problem of a job whose model needs the Hugging Face token when the stack names no secret holding it,
    naming the key and the commands that create and name the secret; empty when the model needs no token or a
    secret is named."""
    repo = gated_repo(model)
    if repo is None or token_secret is not None:
        return []
    return [
        f"{NAMESPACE}:{KEY}: None is not allowed with job.model {model!r}: {repo} is a gated Hugging Face repository "
        "and the job's staging step would fail on the hub's 401 (the job never starts); expected the AWS Secrets "
        "Manager secret holding a token of an account that accepted the model's licence: "
        f"`aws secretsmanager create-secret --name {DOCUMENTED_NAME} --secret-string hf_...`, then "
        f"`pulumi config set --path {NAMESPACE}:{KEY} {DOCUMENTED_NAME}`; or an ungated model (a path in the image, a "
        "preset without a hub checkpoint, or another hub id)"
    ]
