"""`python -m preflight --stack NAME`: what AWS, the Hugging Face Hub and this machine's Docker would refuse, before
`pulumi up` bills anything. Uses your AWS credentials (the usual chain) in the stack's region and your Hugging Face
token (HF_TOKEN, or `hf auth login`'s file); reads metadata only, never the token's secret.

    .venv/bin/python -m preflight --stack my-run

Exit 0 when nothing would fail, 1 when something would (each problem printed with its fix), 2 for a stack file the
config model refuses.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys

from preflight.aws import aws_clients
from preflight.checks import Machine, run_checks
from preflight.findings import problems, report
from preflight.image import docker_config_path
from stack.fields import ConfigError
from stack.files import load_stack_config
from trainer.base.s3.transfer import WAIT_VARIABLE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, help="the stack whose Pulumi.<stack>.yaml to check")
    args = parser.parse_args(argv)
    try:
        config = load_stack_config(args.stack)
    except (ConfigError, FileNotFoundError) as error:
        print(f"preflight: {error}", file=sys.stderr)
        return 2
    # The trainer's S3 reads wait out a fresh Pod Identity grant; a user's own denial is not one.
    os.environ.setdefault(WAIT_VARIABLE, "0")
    from huggingface_hub import HfApi, get_token

    machine = Machine(docker_config_path(), platform.machine(), shutil.which)
    findings = run_checks(config, aws_clients(config.region), HfApi(), get_token(), machine)
    print(f"preflight of stack {args.stack} ({config.region}):")
    print("\n".join(report(findings)))
    return 1 if problems(findings) else 0


if __name__ == "__main__":
    sys.exit(main())
