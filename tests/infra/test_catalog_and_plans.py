"""The instance catalog and the pure planning functions of the infra components."""

from __future__ import annotations

import ipaddress

import pytest

from infra.gpu_nodes import efa_network_interfaces, hugepages_user_data
from infra.network import subnet_plan
from sizing.catalog import CATALOG, instance_type
from trainer.base.hardware.chips import PEAK_BF16_FLOPS


def test_the_reference_types_have_the_documented_efa_layouts() -> None:
    assert (CATALOG["p5.48xlarge"].network_cards, CATALOG["p5.48xlarge"].efa_interfaces) == (32, 32)
    assert (CATALOG["p4de.24xlarge"].network_cards, CATALOG["p4de.24xlarge"].efa_interfaces) == (4, 4)
    assert CATALOG["p5en.48xlarge"].efa_interfaces == 16


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_entry_is_complete_and_consistent(name: str) -> None:
    entry = CATALOG[name]
    assert entry.gpu_chip in PEAK_BF16_FLOPS
    assert entry.gpus > 0 and entry.gpu_memory_gib > 0 and entry.price_per_hour_usd > 0
    if entry.supports_efa:
        assert entry.efa_interfaces == entry.network_cards  # one EFA per network card
    assert not entry.gpudirect_rdma or entry.supports_efa


def test_unknown_instance_type_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"p5\.48xlarge"):
        instance_type("p6.96xlarge")


@pytest.mark.parametrize("name", [n for n, t in CATALOG.items() if t.supports_efa])
def test_efa_interfaces_cover_each_card_once_with_the_primary_carrying_ip(name: str) -> None:
    instance = CATALOG[name]
    interfaces = efa_network_interfaces(instance, "sg-efa", "sg-cluster")
    assert [i["network_card_index"] for i in interfaces] == list(range(instance.network_cards))
    assert interfaces[0]["interface_type"] == "efa" and interfaces[0]["device_index"] == 0
    assert interfaces[0]["security_groups"] == ["sg-cluster", "sg-efa"]
    for interface in interfaces[1:]:
        assert interface["security_groups"] == ["sg-efa"]  # no IP traffic, so no cluster group on these


def test_hugepages_user_data_is_mime_with_a_shell_part() -> None:
    text = hugepages_user_data()
    assert text.startswith("MIME-Version: 1.0")
    assert "text/x-shellscript" in text and "vm.nr_hugepages" in text


@pytest.mark.parametrize("azs", [["us-east-1a", "us-east-1b"], ["us-east-1a", "us-east-1b", "us-east-1c"]])
def test_subnet_plan_gives_disjoint_subnets_inside_the_vpc(azs: list[str]) -> None:
    vpc = ipaddress.IPv4Network("10.0.0.0/16")
    plan = subnet_plan(str(vpc), azs, 19, 22)
    subnets = [ipaddress.IPv4Network(c) for p in plan for c in (p.private_cidr, p.public_cidr)]
    assert all(s.subnet_of(vpc) for s in subnets)
    assert all(not a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1 :])
    assert [p.availability_zone for p in plan] == azs
