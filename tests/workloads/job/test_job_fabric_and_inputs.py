"""What the job's trainer is told beyond the stack's own keys: the fabric its preflight should find on the instance type
(sizing's expectation, rendered as flags), and which s3:// inputs its pods' role may read (the held-out set too)."""

from __future__ import annotations

import dataclasses

from local.launch import LOCAL_PREFLIGHT_MIN_FRACTION, local_trainer_config
from sizing.throughput import expected_fabric
from trainer.base.flags.config import to_argv
from workloads.job.spec import job_spec

from .job_stacks import IMAGE, config_of, spec_of


def test_a_p5_job_expects_nvlink_within_a_node_and_efa_on_each_rail() -> None:
    spec = spec_of("p5-2")
    expected = expected_fabric(config_of("p5-2").gpu_nodes.instance)
    preflight = spec.trainer.preflight
    assert preflight.expect_intra_gb_per_s == round(expected.intra_gb_per_s or 0.0, 1) > 0
    assert preflight.expect_inter_gb_per_s == round(expected.inter_rail_gb_per_s or 0.0, 1) > 0
    argv = to_argv(spec.trainer)
    assert argv[argv.index("--preflight-expect-inter-gb-per-s") + 1] == str(preflight.expect_inter_gb_per_s)


def test_a_node_without_efa_or_a_second_gpu_expects_nothing_so_only_the_nodes_median_is_the_reference() -> None:
    preflight = spec_of("dev").trainer.preflight
    assert (preflight.expect_intra_gb_per_s, preflight.expect_inter_gb_per_s) == (0.0, 0.0)


def test_the_local_run_drops_the_gpu_figures_for_loopback_gloo() -> None:
    argv = to_argv(spec_of("p5-2").trainer)
    local = local_trainer_config(argv, {}, 0, range(1, 3))
    assert (local.preflight.expect_intra_gb_per_s, local.preflight.expect_inter_gb_per_s) == (0.0, 0.0)
    # and judges the local nodes against each other only loosely: their figures vary with the shared cores' load
    assert local.preflight.min_fraction == min(
        spec_of("p5-2").trainer.preflight.min_fraction, LOCAL_PREFLIGHT_MIN_FRACTION
    )


def test_an_s3_validation_data_set_is_among_the_inputs_the_pods_may_read() -> None:
    config = config_of("dev")
    job = config.job
    held_out = "s3://team-data/dialogsum/validation.jsonl"
    validated = dataclasses.replace(job, validation=dataclasses.replace(job.validation, dataset=held_out))
    spec = job_spec(dataclasses.replace(config, job=validated), IMAGE)
    assert held_out in spec.artifacts.inputs
    assert held_out not in spec_of("dev").artifacts.inputs
