"""What goes into the trainer image, and the tag that names it: a digest of exactly those inputs.

Torch-free and Pulumi-free, so the render CLI can name the image the stack would build. The content tag changes
when and only when the image would: a trainer source file, the lock of its dependencies (requirements-trainer.lock),
the Dockerfile or a pinned version in its build arguments.

The ECR repository's tags are immutable, and ECR refuses to push an existing tag again even for an identical
image. So the pushed tag is the content tag plus a push id that is new whenever the content tag changes (a revert
to earlier sources included) or the stack is recreated: no tag is ever pushed twice, and a tag always names the
same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from stack.paths import PROJECT_ROOT
from stack.versions import EFA_INSTALLER_VERSION, TRAINER_BASE_IMAGE

DOCKERFILE = Path("docker/Dockerfile")
# The build context is the project root; docker/Dockerfile.dockerignore lets in only these (BuildKit reads a
# Dockerfile-specific ignore file before the context's own).
IMAGE_INPUTS = (
    Path("requirements-trainer.lock"),  # compiled from requirements-trainer*.txt by `make lock`
    Path("trainer"),
    DOCKERFILE,
    Path("docker/verify_efa_installer.sh"),
)
TAG_LENGTH = 16


def build_args() -> dict[str, str]:
    """The Dockerfile's ARGs: the pinned versions, kept in stack/versions.py alone."""
    return {"BASE_IMAGE": TRAINER_BASE_IMAGE, "EFA_INSTALLER_VERSION": EFA_INSTALLER_VERSION}


def image_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """Every file the image is built from, relative to `root`, sorted; caches and bytecode left out."""
    files: list[Path] = []
    for entry in IMAGE_INPUTS:
        path = root / entry
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        files += [p.relative_to(root) for p in candidates if p.is_file() and _belongs_in_image(p)]
    return files


def _belongs_in_image(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix != ".pyc"


def content_tag(root: Path = PROJECT_ROOT) -> str:
    """A tag for the image built from `root`: sha256 over the inputs' paths and bytes and the build args."""
    digest = hashlib.sha256()
    for name, value in sorted(build_args().items()):
        digest.update(f"arg {name}={value}\n".encode())
    for relative in image_files(root):
        digest.update(f"file {relative.as_posix()}\n".encode())
        digest.update((root / relative).read_bytes())
    return digest.hexdigest()[:TAG_LENGTH]


def pushed_tag(content: str, push_id: str) -> str:
    """The tag an image is pushed under: its content tag and the push id (workloads/job/image.py makes it)."""
    return f"{content}-{push_id}"


def repository_name(stack: str) -> str:
    """The stack's ECR repository for the trainer image."""
    return f"fsdp-eks/{stack}/trainer"


def unpushed_image_reference(stack: str, root: Path = PROJECT_ROOT) -> str:
    """The image as the render CLI names it: repository and tag, without the account's registry host, which only
    the deployed stack knows (it then uses the pushed image's digest)."""
    return f"{repository_name(stack)}:{content_tag(root)}"
