"""AWS calls made just after the stack granted them, retried while the grant takes effect: the launcher's read of the
Hugging Face token's secret (hub_token.py) and staging's reads from S3 (trainer/base/s3/transfer.py).

The stack creates the pod's role, its policy and its Pod Identity association just before the job, and each is
eventually consistent ("associations may take several seconds to be effective", EKS API reference,
CreatePodIdentityAssociation; IAM user guide, "Changes that I make are not always immediately visible"). So missing
credentials and a denial are retried with backoff for a bounded wait before they count; any other error (a secret,
bucket or key that does not exist) is final at once: no new pod would find it any different.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

# What a new role, policy or association answers until IAM and EKS Pod Identity have caught up: no credentials in
# the pod yet (botocore NoCredentialsError, CredentialRetrievalError, PartialCredentialsError), the endpoint not yet
# reachable, or the call denied (Secrets Manager's AccessDeniedException, S3's AccessDenied) or its key not yet
# usable. Anything else (ResourceNotFoundException, NoSuchBucket, NoSuchKey, ...) is final at once.
RETRIED_ERRORS = frozenset(
    {
        "NoCredentialsError",
        "CredentialRetrievalError",
        "PartialCredentialsError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "AccessDeniedException",
        "AccessDenied",
        "UnrecognizedClientException",
        "ExpiredTokenException",
        "ExpiredToken",
        "InvalidSignatureException",
        "DecryptionFailure",
    }
)
DEFAULT_WAIT_SECONDS = 120.0
FIRST_DELAY_S, LONGEST_DELAY_S = 2.0, 30.0

T = TypeVar("T")


class AwsError(RuntimeError):
    """An AWS call that failed; the message is one line (a launcher's reason line is the pod's last word), whatever an
    endpoint answered. `code` is AWS's error code, or botocore's exception name where no call was answered."""

    def __init__(self, message: str, code: str = "", status: int | None = None):
        super().__init__(" ".join(message.split()))
        self.code = code
        self.status = status  # the HTTP status of an answered call

    @property
    def retried(self) -> bool:
        """Whether a fresh role or association can still be catching up: a RETRIED_ERRORS code, or any 403 (an API
        that answers a denial in another protocol's words, as a local stand-in may, is still a denial)."""
        return self.code in RETRIED_ERRORS or self.status == 403


def wait_seconds(environ: Mapping[str, str], variable: str, default: float = DEFAULT_WAIT_SECONDS) -> float:
    """The wait for a grant, overridden by `variable` (the tests set 0)."""
    return float(environ.get(variable) or default)


def with_retries(
    call: Callable[[], T],
    wait_seconds: float,
    program: str,
    doing: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`call()`, retried with backoff (2, 4, 8, 16, then 30 s) while it fails with an error a fresh role or
    association gives and `wait_seconds` have not passed; each retry says on stderr, as `program`, what it was
    `doing` and why."""
    deadline, delay = clock() + wait_seconds, FIRST_DELAY_S
    while True:
        try:
            return call()
        except AwsError as error:
            if not error.retried or clock() + delay > deadline:
                raise
            print(f"{program}: {error.code} {doing}; retry in {delay:.0f} s", file=sys.stderr)
            sleep(delay)
            delay = min(delay * 2, LONGEST_DELAY_S)
