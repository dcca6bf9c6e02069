"""The job's memory per GPU, from the sizing model, fits the GPU of its node type; a job the policy cannot size is
"not checked"."""

from __future__ import annotations

import pytest

from policy.memory import UnsizedError, estimate, job_shape, memory_fit_violations, trainer_argv
from policy.props import NOT_CHECKED, UNKNOWN
from stack.files import stack_names
from tests.policy.examples import pytorchjob, set_trainer_flag, worker_container

PYTORCHJOB = "kubernetes:kubeflow.org/v1:PyTorchJob"


@pytest.mark.parametrize("stack", stack_names())
def test_every_stacks_job_fits(stack: str) -> None:
    assert memory_fit_violations(PYTORCHJOB, pytorchjob(stack)) == []


def test_a_70b_model_unsharded_on_one_node_does_not_fit() -> None:
    job = set_trainer_flag(
        set_trainer_flag(pytorchjob("p5-1"), "--model", "llama2-70b"), "--sharding-strategy", "NO_SHARD"
    )
    (problem,) = memory_fit_violations(PYTORCHJOB, job)
    assert "llama2-70b" in problem and "NO_SHARD" in problem and "GiB per GPU" in problem and "80 GiB" in problem
    assert "python -m sizing --model llama2-70b --instance p5.48xlarge --nodes 1" in problem


def test_the_job_is_read_from_its_trainer_flags_and_replicas() -> None:
    shape = job_shape(pytorchjob("p4de-16"))
    assert (shape.instance.name, shape.nodes, shape.gpus_per_node) == ("p4de.24xlarge", 16, 8)
    assert (shape.train.model.name, shape.train.parallel.sharding_strategy) == (
        "meta-llama/Llama-2-7b-hf",
        "HYBRID_SHARD",
    )


def test_an_elastic_job_is_sized_at_its_fewest_nodes() -> None:
    job = pytorchjob("p5-16")
    job["spec"]["elasticPolicy"]["minReplicas"] = 2.0
    assert job_shape(job).nodes == 2


def test_fewer_ranks_need_more_memory_per_gpu_when_sharding() -> None:
    hsdp = pytorchjob("p5-16")  # HYBRID_SHARD with its bf16 all-reduce, which FULL_SHARD does not take
    job = set_trainer_flag(set_trainer_flag(hsdp, "--sharding-strategy", "FULL_SHARD"), "--all-reduce-dtype", "fp32")
    full = estimate(job_shape(job)).needed_gib
    job["spec"]["elasticPolicy"]["minReplicas"] = 1.0
    assert estimate(job_shape(job)).needed_gib > full


def test_the_figure_is_the_sizing_models_own() -> None:
    from stack.files import load_stack_config
    from stack.fit import stack_sizing
    from trainer.base.units import GIB

    expected = stack_sizing(load_stack_config("p5-16"))
    assert expected is not None
    assert estimate(job_shape(pytorchjob("p5-16"))).needed_gib == expected.needed_bytes / GIB


def _not_checked(job: dict) -> str:
    (problem,) = memory_fit_violations(PYTORCHJOB, job)
    assert problem.startswith(NOT_CHECKED), problem
    return problem


def test_a_model_the_project_cannot_size_is_not_checked() -> None:
    job = set_trainer_flag(pytorchjob("p5-16"), "--model", "/models/my-finetune")
    with pytest.raises(UnsizedError):
        estimate(job_shape(job))
    assert "'/models/my-finetune'" in _not_checked(job) and "trainer/base/model/presets.py" in _not_checked(job)


def test_flags_the_trainer_would_refuse_are_not_checked_with_the_parsers_reason() -> None:
    job = set_trainer_flag(pytorchjob("p5-16"), "--sharding-strategy", "ZERO3")
    assert "ZERO3" in _not_checked(job)


def test_the_parsers_reason_never_quotes_a_pasted_token() -> None:
    """argparse names an unrecognised flag with its value; pasted after a made-up flag, a token would land in the
    preview comment. The flag is named, the value left out."""
    token = "hf_" + "Abcdefghijklmnopqrstuvwxyz01234567"
    job = set_trainer_flag(pytorchjob("p5-16"), "--hub-token", token)
    problem = _not_checked(job)
    assert "--hub-token" in problem and token not in problem and "hf_A" not in problem


def test_a_value_the_sizing_model_refuses_is_not_checked() -> None:
    job = set_trainer_flag(pytorchjob("p5-16"), "--global-batch-size", "3")
    assert "sizing model refuses" in _not_checked(job)


def _worker_spec(job: dict) -> dict:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]


@pytest.mark.parametrize(
    "change,what",
    [
        (lambda job: worker_container(job).update(command=UNKNOWN), "command"),
        (lambda job: worker_container(job)["command"].__setitem__(-1, UNKNOWN), "command"),
        (lambda job: _worker_spec(job)["template"]["spec"].update(containers=UNKNOWN), "pods"),
        (lambda job: _worker_spec(job).update(template=UNKNOWN), "pods"),
        (lambda job: job["spec"].update(pytorchReplicaSpecs=UNKNOWN), "pods"),
        (lambda job: _worker_spec(job).update(replicas=UNKNOWN), "replica counts"),
        (lambda job: job["spec"]["elasticPolicy"].update(minReplicas=UNKNOWN), "minReplicas"),
        (lambda job: job["spec"].update(nprocPerNode=UNKNOWN), "nprocPerNode"),
        (
            lambda job: _worker_spec(job)["template"]["spec"]["nodeSelector"].update(
                {"node.kubernetes.io/instance-type": UNKNOWN}
            ),
            "instance type",
        ),
    ],
)
def test_a_job_with_a_value_unknown_during_preview_is_not_checked(change, what: str) -> None:
    job = pytorchjob("p5-16")
    change(job)
    assert what in _not_checked(job)


def test_the_trainer_may_be_launched_by_python_too() -> None:
    container = {"command": ["python"], "args": ["-m", "trainer", "--model", "tiny"]}
    assert trainer_argv(container) == ["--model", "tiny"]


def test_a_job_that_does_not_run_the_trainer_is_not_checked() -> None:
    job = pytorchjob("p5-16")
    worker_container(job)["command"] = ["sleep", "infinity"]
    assert "python -m trainer" in _not_checked(job)


def test_the_70b_lora_job_fits_one_node_only_with_its_lora_flags() -> None:
    job = pytorchjob("p5-1-llama70b-lora")
    assert job_shape(job).train.lora.rank == 16 and memory_fit_violations(PYTORCHJOB, job) == []
    (problem,) = memory_fit_violations(PYTORCHJOB, set_trainer_flag(job, "--lora-rank", "0"))
    assert "meta-llama/Llama-3.1-70B" in problem and "80 GiB" in problem
