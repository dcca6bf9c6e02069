"""Every job API's reader (policy/jobs/reader.py), by the resource type the pack sees: a third API is a module beside
pytorchjob.py and a line here."""

from __future__ import annotations

from policy.jobs.pytorchjob import PyTorchJobReader
from policy.jobs.reader import JobReader
from policy.jobs.trainjob import TrainJobReader
from stack.job_api import DEFAULT_JOB_API

JOB_READERS: tuple[JobReader, ...] = (PyTorchJobReader(), TrainJobReader())
_BY_TYPE = {reader.resource_type: reader for reader in JOB_READERS}
# The resource a check reads when it is not told which: the default job API's.
DEFAULT_JOB_TYPE = next(reader.resource_type for reader in JOB_READERS if reader.name == DEFAULT_JOB_API)


def reader_for(resource_type: str) -> JobReader | None:
    """The reader of resources of `resource_type`; None for a resource that holds no job's pods."""
    return _BY_TYPE.get(resource_type)
