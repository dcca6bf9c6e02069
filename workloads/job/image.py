"""TrainerImage: the stack's ECR repository for the trainer image, and the image, built and pushed, or given.

Without job.image, `pulumi up` builds docker/Dockerfile with BuildKit (pulumi-docker-build; needs a Docker
engine where `pulumi up` runs) and pushes it under its content tag (workloads/job/image_source.py). The job then
runs the pushed digest, so what runs is exactly what was built. With job.image, nothing is built.

The push logs in with the Docker credentials of the machine that runs `pulumi up`, not with a registry password the
program fetches: an ECR login token in the image's inputs would sit in the stack's state, and whoever reads the state
would hold the deploying role's access to every ECR repository it reaches for twelve hours (ECR API reference,
GetAuthorizationToken). Log in before `pulumi up` (docs/aws.md, "The trainer image"):
`aws ecr get-login-password --region REGION | docker login --username AWS --password-stdin
ACCOUNT.dkr.ecr.REGION.amazonaws.com`, or configure amazon-ecr-credential-helper for the registry in
~/.docker/config.json's credHelpers. pulumi-docker-build reads those credentials when it starts: without
`registries` its in-memory auth is whatever the host's Docker config holds, credential helpers included (pulumi/
pulumi-docker-build v0.0.22, provider/internal/host.go newHost: `docker.ConfigFile().GetAllCredentials()`, and
cli.go wrap, which layers a resource's `registries` over those; docker/cli cli/config/configfile/file.go
GetAllCredentials asks the credsStore and every credHelpers entry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build
import pulumi_random as random

from workloads.job.image_source import DOCKERFILE, build_args, content_tag, pushed_tag, repository_name

# Images kept in the repository: enough to roll back a few trainer changes; older ones expire.
KEEP_IMAGES = 20


@dataclass(frozen=True)
class TrainerImageArgs:
    stack: str
    image: str | None = None  # job.image: use it instead of building


class TrainerImage(pulumi.ComponentResource):
    """`image_ref` is what the PyTorchJob runs: the given image, or the pushed one as repository:tag@digest."""

    image_ref: pulumi.Output[str]
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: TrainerImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fsdp-eks:workloads:TrainerImage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        repository = aws.ecr.Repository(
            f"{name}-repository",
            name=repository_name(args.stack).lower(),
            image_scanning_configuration={"scan_on_push": True},
            # A tag, once pushed, always names the same image; workloads/job/image_source.py makes every push's tag new.
            image_tag_mutability="IMMUTABLE",
            # The images are rebuilt from source at will; `pulumi destroy` should not stop at a non-empty repository.
            force_delete=True,
            opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-lifecycle", repository=repository.name, policy=lifecycle_policy(), opts=child)
        self.repository_url = repository.repository_url
        if args.image:
            self.image_ref = pulumi.Output.from_input(args.image)
        else:
            self.image_ref = self._build(name, repository, child)
        self.register_outputs({"repositoryUrl": self.repository_url, "imageRef": self.image_ref})

    def _build(self, name: str, repository: aws.ecr.Repository, opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
        tag = content_tag()
        # New with every new content tag (its keeper) and with every new stack: ECR refuses a tag pushed before.
        push_id = random.RandomId(f"{name}-push-id", byte_length=4, keepers={"contentTag": tag}, opts=opts)
        image = docker_build.Image(
            f"{name}-build",
            # Relative to the project root, where Pulumi runs the program; docker/Dockerfile.dockerignore narrows
            # the context to the trainer's files.
            context=docker_build.BuildContextArgs(location="."),
            dockerfile=docker_build.DockerfileArgs(location=DOCKERFILE.as_posix()),
            build_args=build_args(),
            platforms=[docker_build.Platform.LINUX_AMD64],  # the GPU nodes are x86_64
            tags=[
                pulumi.Output.all(repository.repository_url, push_id.hex).apply(
                    lambda v: f"{v[0]}:{pushed_tag(tag, v[1])}"
                )
            ],
            push=True,  # with the host's Docker credentials for the registry (see the module's docstring)
            build_on_preview=False,  # `pulumi preview` needs no Docker engine
            opts=opts,
        )
        return image.ref


def lifecycle_policy() -> str:
    """ECR lifecycle rules: untagged layers of superseded pushes go after a day; at most KEEP_IMAGES images stay."""
    rules = [
        {
            "rulePriority": 1,
            "description": "Expire untagged images after a day",
            "selection": {
                "tagStatus": "untagged",
                "countType": "sinceImagePushed",
                "countUnit": "days",
                "countNumber": 1,
            },
            "action": {"type": "expire"},
        },
        {
            "rulePriority": 2,
            "description": f"Keep the newest {KEEP_IMAGES} images",
            "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": KEEP_IMAGES},
            "action": {"type": "expire"},
        },
    ]
    return json.dumps({"rules": rules})
