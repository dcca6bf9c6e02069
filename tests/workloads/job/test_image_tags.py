"""The trainer image's repository keeps tags immutable, and the program never pushes a tag twice: the pushed tag is
the content tag plus a push id renewed with every new content tag (ECR refuses an existing tag in an immutable
repository even for an identical image)."""

from __future__ import annotations

import pytest

from stack.files import raw_stack_config
from tests.harness.pulumi_program import run_program
from workloads.job.image_source import content_tag

pytestmark = pytest.mark.program  # every test here runs __main__.py under the mocks


def test_the_repository_tags_are_immutable_and_each_push_gets_a_new_tag() -> None:
    run = run_program("p5-2")
    assert run.one("aws:ecr/repository:Repository").inputs["imageTagMutability"] == "IMMUTABLE"
    push_id = run.one("random:index/randomId:RandomId")
    assert push_id.inputs["keepers"] == {"contentTag": content_tag()}  # a new content tag, a new push id
    (tag,) = run.one("docker-build:index:Image").inputs["tags"]
    assert tag.endswith(f":{content_tag()}-{push_id.outputs['hex']}")


def test_a_given_image_builds_nothing_and_pushes_no_tag() -> None:
    job = raw_stack_config("dev")["fsdp-eks:job"] | {"image": "registry.example/trainer:1"}
    run = run_program("dev", {"fsdp-eks:job": job})
    assert run.error is None, run.error
    assert run.of_type("docker-build:index:Image") == [] and run.of_type("random:index/randomId:RandomId") == []
