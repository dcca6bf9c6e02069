"""No object of the job holds the Hugging Face token, or a way to it but the secret's name: no Kubernetes Secret, no
HF_TOKEN in any pod spec. The pods name the Secrets Manager secret (HF_TOKEN_SECRET) and read it themselves
(trainer/base/pod/hub_token.py), so the stack's state and its preview hold nothing worth stealing."""

from __future__ import annotations

import pytest
import yaml

from stack.files import load_stack_config, stack_names
from stack.job_api import JOB_APIS
from trainer.base.pod.hub_token import SECRET_VARIABLE, TOKEN_VARIABLE
from workloads.job.api import job_api_for
from workloads.job.spec import job_spec


def rendered(stack: str) -> list[dict]:
    config = load_stack_config(stack)
    spec = job_spec(config, "example/trainer:1")
    return [obj for api in JOB_APIS for obj in job_api_for(api).objects(spec)]


@pytest.mark.parametrize("stack", stack_names())
def test_no_rendered_object_is_a_secret_or_sets_the_token(stack: str) -> None:
    objects = rendered(stack)
    assert "Secret" not in {o["kind"] for o in objects}
    text = yaml.safe_dump_all(objects)
    assert f"name: {TOKEN_VARIABLE}\n" not in text and "secretKeyRef" not in text


@pytest.mark.parametrize("stack", stack_names())
def test_the_objects_name_the_secret_exactly_where_the_stack_does(stack: str) -> None:
    secret = load_stack_config(stack).job.hf_token_secret
    text = yaml.safe_dump_all(rendered(stack))
    assert (f"name: {SECRET_VARIABLE}\n" in text) == (secret is not None)
