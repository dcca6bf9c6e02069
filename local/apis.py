"""Every job API's local run by job.api (local/api.py): a third API is a folder beside local/pytorchjob/ and a line
here."""

from __future__ import annotations

from local.api import LocalJobApi
from local.pytorchjob.api import PyTorchJobLocal
from local.trainjob.api import TrainJobLocal

LOCAL_APIS: dict[str, LocalJobApi] = {api.name: api for api in (PyTorchJobLocal(), TrainJobLocal())}


def local_api_for(api: str) -> LocalJobApi:
    """The local run of job.api `api` (a value stack/config.py has checked)."""
    return LOCAL_APIS[api]
