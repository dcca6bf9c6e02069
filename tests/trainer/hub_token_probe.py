"""A worker for the Hugging Face token tests, in the trainer's place: it says whether the HF_TOKEN it inherited from
the launcher is the expected one, by its digest, so that no output ever holds the token.

    HUB_TOKEN_SHA256=<hex> python -m trainer.launch --standalone --nproc-per-node=1 -m tests.trainer.hub_token_probe

Exits 0 when sha256(HF_TOKEN) is HUB_TOKEN_SHA256, EXIT_WRONG_TOKEN otherwise (no token, or another one).
"""

from __future__ import annotations

import hashlib
import os
import sys

EXPECTED_DIGEST_VARIABLE = "HUB_TOKEN_SHA256"
EXIT_WRONG_TOKEN = 7  # none of the launcher's codes: a plain worker failure


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def main() -> int:
    token = os.environ.get("HF_TOKEN")
    same = token is not None and token_digest(token) == os.environ.get(EXPECTED_DIGEST_VARIABLE)
    print(f"hub_token_probe: HF_TOKEN {'is' if same else 'is not'} the expected token", file=sys.stderr)
    return 0 if same else EXIT_WRONG_TOKEN


if __name__ == "__main__":
    sys.exit(main())
