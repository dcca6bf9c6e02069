"""The config model on its own: defaults, derived values, and agreement with Pulumi.yaml and README.md."""

from __future__ import annotations

import yaml

from stack.config import SECTIONS, StackConfig
from stack.docs import pulumi_yaml_document, readme_table, reference_table
from stack.fields import section_defaults
from stack.parse import parse_stack_config
from stack.paths import PROJECT_ROOT as ROOT


def _config(**sections: dict | str) -> StackConfig:
    return parse_stack_config({"aws:region": "us-west-2", **{f"fsdp-eks:{k}": v for k, v in sections.items()}}, "t")


def test_pulumi_yaml_declares_the_model_defaults() -> None:
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["template"]["config"]
    for name, cls in SECTIONS.items():
        assert declared[f"fsdp-eks:{name}"]["default"] == section_defaults(cls), name


def test_pulumi_yaml_is_the_generated_document() -> None:
    assert yaml.safe_load((ROOT / "Pulumi.yaml").read_text()) == pulumi_yaml_document()


def test_readme_config_reference_matches_the_model() -> None:
    assert readme_table((ROOT / "README.md").read_text()) == reference_table()


def test_defaults_apply_without_any_section() -> None:
    config = _config()
    assert config.gpu_nodes.instance_type == "p5.48xlarge"
    assert config.availability_zones == ["us-west-2a", "us-west-2b"]
    assert config.gpu_availability_zone == "us-west-2a"
    assert config.cluster_name == "fsdp-eks-t"


def test_json_text_and_maps_parse_alike() -> None:
    assert _config(gpuNodes='{"count": 4}') == _config(gpuNodes={"count": 4})


def test_cli_strings_are_coerced_like_pulumi_config_set() -> None:
    config = _config(gpuNodes={"count": "4", "efa": "false"})
    assert config.gpu_nodes.count == 4 and config.gpu_nodes.efa is False


def test_efa_defaults_to_what_the_instance_supports() -> None:
    assert _config(gpuNodes={"instanceType": "p5.48xlarge"}).gpu_nodes.efa_enabled
    small_job = {"model": "tiny", "seqLen": 256}  # the default 7B job does not fit a 48 GiB L40S
    assert not _config(gpuNodes={"instanceType": "g6e.xlarge"}, job=small_job).gpu_nodes.efa_enabled


def test_placement_group_is_left_out_inside_a_reservation() -> None:
    reserved = {"capacityReservationId": "cr-0123456789abcdef0", "availabilityZone": "us-west-2a"}
    assert not _config(gpuNodes=reserved).gpu_nodes.uses_placement_group
    assert _config(gpuNodes={"count": 1}).gpu_nodes.uses_placement_group
    assert not _config(gpuNodes={"placementGroup": "never"}).gpu_nodes.uses_placement_group


def test_fsx_defaults_on_for_a_new_cluster_and_off_for_an_existing_one() -> None:
    assert _config().storage.fsx is True
    existing = _config(cluster={"existing": True}, gpuNodes={"count": 1})
    assert existing.storage.fsx is False


def test_the_api_endpoint_is_private_unless_public_access_is_chosen_with_its_cidrs() -> None:
    assert _config().cluster.endpoint_public_access is False
    public = _config(cluster={"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]})
    assert public.cluster.public_access_cidrs == ["203.0.113.0/24"]


def test_a_named_placement_group_replaces_the_one_the_stack_would_make() -> None:
    named = _config(gpuNodes={"count": 1, "placementGroupName": "training-pg"}).gpu_nodes
    assert named.placement_group_name == "training-pg" and not named.uses_placement_group
