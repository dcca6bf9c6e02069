"""The trainer's optional packages: each is imported only where the feature that needs it runs, so a machine without
it runs every other feature, and a run whose flags ask for the feature is refused at start, naming the package
(trainer/validate.py), rather than failing at the first import deep in a step.

Torch-free: read by validation before anything imports torch.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class OptionalPackage:
    module: str
    """The top-level module imported (what find_spec looks for)."""
    feature: str
    """What needs it, in the words of the error."""


S3_CONNECTOR = OptionalPackage("s3torchconnector", "the checkpoints' S3 tier: the Amazon S3 Connector for PyTorch")
BOTO3 = OptionalPackage("boto3", "reading and writing s3:// objects")
TORCHAO = OptionalPackage("torchao", "FP8 training linears")
DATASETS = OptionalPackage("datasets", "Hugging Face hub data sets")


def installed(package: OptionalPackage) -> bool:
    return importlib.util.find_spec(package.module) is not None


def missing_problem(flag: str, package: OptionalPackage) -> str | None:
    """The start-up error for `flag` when `package` is not installed, else None."""
    if installed(package):
        return None
    return f"{flag}: needs the {package.module} package ({package.feature}), which is not installed"
