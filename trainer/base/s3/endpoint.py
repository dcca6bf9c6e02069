"""Where the run's S3 clients connect and in which region: one rule for boto3 and the S3 connector for PyTorch.

On AWS both find everything themselves: the region from AWS_REGION (the pod has it, workloads/job/pod.py), the
credentials from the Pod Identity agent (AWS_CONTAINER_CREDENTIALS_FULL_URI and
AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, which the CRT client behind s3torchconnector reads as Mountpoint for S3 does:
awslabs/mountpoint-s3-csi-driver passes the same two variables to Mountpoint for Pod Identity).

Elsewhere (the local run's S3 API on 127.0.0.1) a variable names the endpoint, read as botocore reads it
(botocore/configprovider.py ConfiguredEndpointProvider): the service's own AWS_ENDPOINT_URL_S3 first, then
AWS_ENDPOINT_URL, neither when AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true. The rule is applied here once and its
answer handed to both clients: the connector's S3Client takes an endpoint argument and reads none of these variables,
and boto3's client gets the same answer with its own lookup of configured endpoints switched off (transfer.py), so a
profile's `services` section cannot send it elsewhere either. Such an endpoint serves buckets by path
(http://127.0.0.1:PORT/bucket/key), not as a host name, so path-style addressing is forced there alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL"
S3_ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_S3"
IGNORE_ENDPOINTS_VARIABLE = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULT_REGION = "us-east-1"  # where S3 answers any bucket's region; a client needs some region to sign with


def endpoint_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint both clients use; None for AWS's own."""
    environ = os.environ if environ is None else environ
    if environ.get(IGNORE_ENDPOINTS_VARIABLE, "").strip().lower() == "true":
        return None
    return environ.get(S3_ENDPOINT_VARIABLE) or environ.get(ENDPOINT_VARIABLE) or None


def region(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return next((environ[name] for name in REGION_VARIABLES if environ.get(name)), DEFAULT_REGION)


def force_path_style(environ: Mapping[str, str] | None = None) -> bool:
    """Path-style addressing: only for an endpoint of our own (AWS serves virtual-hosted style)."""
    return endpoint_url(environ) is not None
