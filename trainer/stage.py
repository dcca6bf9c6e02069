"""`python -m trainer.stage <trainer flags>`: fetch and prepare a run's inputs once, before the workers start.

    HF_HOME=/checkpoints/job/run-1/huggingface python -m trainer.stage --model meta-llama/Llama-2-7b-hf \\
        --dataset knkarthick/dialogsum --data-cache-dir /checkpoints/job/run-1/data-cache ...

Takes the trainer's own flags and stages what they name onto shared storage:
- a hub model's weights (config, safetensors) and tokenizer files into the Hugging Face cache (HF_HOME);
- an s3:// model directory and an s3:// data set's objects into --data-cache-dir (trainer/base/s3/inputs.py: each object
  downloaded again only when its ETag or size changed);
- the data set (and its validation split or --val-dataset), tokenised into --data-cache-dir (trainer/data/cache.py)
  as the trainer will map it.
The workers then run with the hub offline (HF_HUB_OFFLINE=1): no rank calls the hub or S3 for its inputs, none
downloads, none tokenises.
In every pod the launcher runs this before torchrun (`python -m trainer.launch --stage-inputs`,
trainer/base/pod/staging.py says why not in an init container); an exclusive lock on the shared volume (flock: FSx for
Lustre is mounted with the flock option, workloads/job/checkpoint_volume.py) lets the first pod stage while the others
wait, and a marker naming what was staged lets them, and restarts, skip it. Exit status 4 (trainer/base/pod/exits.py
EXIT_STAGING_FAILED) for inputs that cannot be staged, which no retry changes (a missing bucket or key, an empty prefix,
a denial that outlasts the wait for a fresh grant: the last line names the s3:// URI and AWS's error); 2 for flags the
trainer's parser refuses.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trainer.base.errors import InputError
from trainer.base.flags.config import TrainConfig, parse_args
from trainer.base.model.source import BYTE_TOKENIZER, ModelSource, resolve_model
from trainer.base.pod.exits import EXIT_STAGING_FAILED
from trainer.base.s3.inputs import read_manifest, stage_dataset, stage_model
from trainer.base.s3.uri import S3Uri, is_s3_uri
from trainer.main import configure_logging
from trainer.validate import is_local_dataset

log = logging.getLogger("trainer.stage")
WEIGHT_FILES = ["*.json", "*.safetensors"]  # what the trainer reads of a model (trainer/train.py)
# tokenizer.json / tokenizer.model (sentencepiece) / vocab files / chat_template.jinja (transformers'
# CHAT_TEMPLATE_FILE, tokenization_utils_base.py: the template of chat records, trainer/data/tokenizer.py)
TOKENIZER_FILES = ["*.json", "*.model", "*.txt", "*.jinja"]
LOCK = ".stage.lock"
MARKER = ".staged.json"


def model_identity(source: ModelSource, root: Path) -> object:
    """A hub model by its id; an s3:// model by its staged objects (their ETags and sizes: a changed tokenizer is
    applied again); None for the others, read where they are."""
    if source.kind == "s3":
        staged = read_manifest(root, S3Uri.parse(source.name, "--model"))
        return staged.identity() if staged else source.name
    return source.name if source.kind == "hub" else None


def staged_items(config: TrainConfig, source: ModelSource) -> dict[str, object]:
    """What this staging covers; a marker equal to it means there is nothing to do."""
    from trainer.data.cache import dataset_identity
    from trainer.data.packing import val_dataset_config

    validation = config.validation
    items: dict[str, object] = {
        "model": model_identity(source, Path(config.data.cache_dir or ".")),
        "tokenizer": config.model.tokenizer or source.default_tokenizer(),
        "data": dataset_identity(config.data) | {"format": config.data.dataset_format},
        "data_cache": config.data.cache_dir,
    }
    # Only with a split or a validation data set, so that a marker written before they existed still matches.
    if validation.dataset:
        items["val_data"] = dataset_identity(val_dataset_config(config.data, validation))
    elif validation.split > 0:
        items["val_split"] = validation.split
    return items


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """One stager at a time across every pod that mounts `directory` (POSIX advisory lock)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / LOCK, "w")  # noqa: SIM115 (closed below, after the lock)
    except OSError as error:
        # On a shared volume the prepare-checkpoints init container creates the run's directory as root and hands it
        # to the trainer's user; where it could not, its log says why, and this is where the job ends.
        raise InputError(f"--data-cache-dir {directory}: cannot write there ({error})") from error
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def download(repo: str, patterns: list[str]) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, allow_patterns=patterns))


def stage_from_s3(config: TrainConfig, source: ModelSource, root: Path) -> ModelSource:
    """An s3:// model and data set into `root`; the model's source then names its staged directory."""
    if source.kind == "s3":
        log.info("model %s in %s", source.name, stage_model(source.name, root))
        source = resolve_model(source.name, str(root), offline=True)
    for dataset in (config.data.dataset, config.validation.dataset):
        if dataset and is_s3_uri(dataset):
            staged = stage_dataset(dataset, root)
            log.info("data set %s: %d objects staged in %s", dataset, len(staged.objects), root)
    return source


def stage(config: TrainConfig) -> None:
    """Download what the hub and S3 serve and tokenise the data set; idempotent."""
    # A hub model's config.json: fetched (or found in the cache); an s3:// model's, read from S3.
    source = resolve_model(config.model.name, config.data.cache_dir)
    if not config.data.cache_dir:
        raise InputError("--data-cache-dir: staging needs the shared directory the workers map the data set from")
    root = Path(config.data.cache_dir)
    check_durable_tier(config, source)
    with exclusive(root):
        source = stage_from_s3(config, source, root)
        wanted = staged_items(config, source)
        marker = root / MARKER
        if marker.is_file() and json.loads(marker.read_text()) == wanted:
            log.info("already staged: %s", wanted)
            return
        if source.kind == "hub":
            log.info("weights of %s in %s", source.name, download(source.name, WEIGHT_FILES))
        tokenizer_name = config.model.tokenizer or source.default_tokenizer()
        if tokenizer_name != BYTE_TOKENIZER and not Path(tokenizer_name).expanduser().is_dir():
            log.info("tokenizer %s in %s", tokenizer_name, download(tokenizer_name, TOKENIZER_FILES))
        tokenise(config, source, root)
        marker.write_text(json.dumps(wanted, indent=2))


def check_durable_tier(config: TrainConfig, source: ModelSource) -> None:
    """Before any GPU work, what the workers would otherwise find only after loading the model or at the last step:
    the run's bucket takes its writes (trainer/checkpoint/durable_preflight.py), and a --resume-from the run will read
    (it has no
    checkpoint of its own yet) holds a complete checkpoint of this model. Each failure is an InputError naming the
    URI: staging's exit 4, final."""
    from trainer.checkpoint.durable_preflight import check_artifacts, check_region
    from trainer.checkpoint.layout import fingerprint_difference, latest_checkpoint, model_fingerprint
    from trainer.checkpoint.s3_store import S3Checkpoints, checkpoints_root, resume_source

    artifacts, resume_from = config.artifacts.uri, config.artifacts.resume_from
    if artifacts:
        check_artifacts(artifacts)
    if not resume_from or latest_checkpoint(config.checkpoint.directory) is not None:
        return
    if artifacts and S3Checkpoints(checkpoints_root(artifacts)).complete():
        return  # the run resumes from its own durable tier, never from --resume-from again
    uri = S3Uri.parse(resume_from, "--resume-from")
    check_region(uri)
    found = resume_source(uri)
    if found is None:
        raise InputError(
            f"--resume-from {uri}: no complete checkpoint there (a step_<N> prefix with meta.json, or a prefix holding "
            "them)"
        )
    difference = fingerprint_difference(S3Checkpoints(found.uri).read_meta(found.uri), model_fingerprint(source.shape))
    if difference:
        raise InputError(f"--resume-from {found.uri}: a checkpoint of another model ({difference})")
    log.info("the run will resume from %s", found.uri)


def tokenise(config: TrainConfig, source: ModelSource, root: Path) -> None:
    from trainer.data.cache import build_split_entries
    from trainer.data.tokenizer import load_tokenizer

    for flag, dataset in (("--dataset", config.data.dataset), ("--val-dataset", config.validation.dataset)):
        if (
            dataset
            and dataset != "synthetic"
            and is_local_dataset(dataset)
            and not Path(dataset).expanduser().is_file()
        ):
            raise InputError(f"{flag} {dataset}: no such file")
    tokenizer = load_tokenizer(config.model.tokenizer or source.default_tokenizer())
    build_split_entries(config.data, config.validation, tokenizer, root)


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    from trainer.base.pod.env import read_env

    configure_logging(read_env())
    try:
        stage(config)
    except InputError as error:
        one_line = " ".join(
            str(error).split()
        )  # the launcher quotes this last line as its reason (trainer/launch/launcher.py)
        print(f"python -m trainer.stage: error: {one_line}", file=sys.stderr)
        return EXIT_STAGING_FAILED
    log.info("staged into %s (HF_HOME %s)", config.data.cache_dir, os.environ.get("HF_HOME", "default"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
