"""Register the trainer image and the training job of one stack under the Pulumi SDK's mocks, and write what was
registered as JSON: the job's components tested on their own, before (or besides) their wiring in __main__.py.

Usage: python -m tests.workloads.job.job_component_program STACK OUT.json [--given-image REF] [--fsx]
           [--token-secret NAME] [--bucket NAME] [--dataset URI]
Run in a fresh process (see run_components below): the Pulumi runtime keeps global state. --token-secret names the
Hugging Face token's Secrets Manager secret (job.hfTokenSecret) instead of the stack file's; --bucket an existing
artifacts bucket (artifacts.bucket; without it the stack's own is created, as __main__.py does); --dataset the job's
data set.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import mocks
from pulumi.runtime.sync_await import _sync_await

from infra.artifacts import ArtifactsBucket, ArtifactsBucketArgs
from stack.file_system import LustreFileSystem
from stack.files import load_stack_config
from tests.harness.mock_runner import FakeCloud, RecordingMonitor
from tests.harness.pulumi_program import run_module
from workloads.job.component import TrainingJob, TrainingJobArgs
from workloads.job.image import TrainerImage, TrainerImageArgs
from workloads.job.spec import job_spec

PUSHED_DIGEST = "sha256:" + "ab" * 32


class FakeRegistry(FakeCloud):
    """FakeCloud, plus what a finished docker-build push reports: the pushed reference with its digest."""

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict]:
        resource_id, state = super().new_resource(args)
        if args.typ == "aws:ecr/repository:Repository":
            state |= {
                "repositoryUrl": f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{args.inputs['name']}",
                "registryId": "123456789012",
            }
        if args.typ == "docker-build:index:Image":
            state |= {"ref": f"{args.inputs['tags'][0]}@{PUSHED_DIGEST}"}
        return resource_id, state


@dataclasses.dataclass(frozen=True)
class Options:
    given_image: str | None = None
    fsx: bool = False
    token_secret: str | None = None
    bucket: str | None = None
    dataset: str | None = None


def program(stack: str, options: Options) -> None:
    given_image, fsx, token_secret = options.given_image, options.fsx, options.token_secret
    config = load_stack_config(stack)
    if options.bucket:
        config = dataclasses.replace(config, artifacts=dataclasses.replace(config.artifacts, bucket=options.bucket))
    if options.dataset:
        config = dataclasses.replace(config, job=dataclasses.replace(config.job, dataset=options.dataset))
    if given_image:
        config = dataclasses.replace(config, job=dataclasses.replace(config.job, image=given_image))
    if token_secret:
        config = dataclasses.replace(config, job=dataclasses.replace(config.job, hf_token_secret=token_secret))
    provider = k8s.Provider("k8s", kubeconfig="{}")
    # Stands in for the real platform; depending on a component means depending on its children, so it has one.
    platform = pulumi.ComponentResource("fsdp-eks:workloads:Platform", "platform")
    k8s.core.v1.ConfigMap("platform-ready", opts=pulumi.ResourceOptions(parent=platform, provider=provider))
    image = TrainerImage("trainer", TrainerImageArgs(stack=config.stack, image=config.job.image))
    file_system = LustreFileSystem("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200) if fsx else None
    bucket = None if config.artifacts.bucket else ArtifactsBucket("artifacts", ArtifactsBucketArgs(config.stack))
    job = TrainingJob(
        "job",
        TrainingJobArgs(
            spec=job_spec(config),
            provider=provider,
            cluster_name=config.cluster_name,
            image=image.image_ref,
            depends_on=[platform],
            checkpoint_file_system=file_system,
            artifacts_bucket=bucket.bucket_name if bucket else None,
        ),
    )
    pulumi.export("rendezvousId", job.rendezvous_id)
    pulumi.export("imageRef", image.image_ref)


def run(stack: str, options: Options) -> dict[str, Any]:
    fake = FakeRegistry()
    monitor = RecordingMonitor(fake)
    mocks.set_mocks(fake, project="fsdp-eks", stack=stack, preview=False, monitor=monitor)
    _sync_await(mocks.run_pulumi_func(lambda: program(stack, options)))
    return {"resources": monitor.records}


def run_components(
    stack: str,
    given_image: str | None = None,
    fsx: bool = False,
    token_secret: str | None = None,
    bucket: str | None = None,
    dataset: str | None = None,
) -> dict[str, Any]:
    """Run the program above in a fresh process and return its registrations."""
    env = {"PULUMI_CONFIG": json.dumps({"aws:region": "us-east-1"}), "PULUMI_CONFIG_SECRET_KEYS": "[]"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [stack, str(out)]
        argv += (["--given-image", given_image] if given_image else []) + (["--fsx"] if fsx else [])
        argv += ["--token-secret", token_secret] if token_secret else []
        argv += (["--bucket", bucket] if bucket else []) + (["--dataset", dataset] if dataset else [])
        status, output = run_module("tests.workloads.job.job_component_program", argv, env)
        if status or not out.exists():
            raise RuntimeError(f"component run of {stack} failed:\n{output}")
        result = json.loads(out.read_text())
    result["log"] = output
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("stack")
    parser.add_argument("out")
    parser.add_argument("--given-image")
    parser.add_argument("--fsx", action="store_true")
    parser.add_argument("--token-secret")
    parser.add_argument("--bucket")
    parser.add_argument("--dataset")
    given = parser.parse_args()
    options = Options(given.given_image, given.fsx, given.token_secret, given.bucket, given.dataset)
    registered = run(given.stack, options)
    Path(given.out).write_text(json.dumps(registered, default=repr))
