"""The GPU node group's bounds and the autoscaler's node-template tags (stack/gpu_autoscaling.py)."""

from __future__ import annotations

from stack.config import GpuNodesConfig
from stack.gpu_autoscaling import (
    NODE_TEMPLATE_RESOURCE_TAG,
    autoscaled,
    max_size,
    min_size,
    node_template_tags,
    releases_idle_nodes,
)

RESERVATION = "cr-0123456789abcdef0"


def test_idle_nodes_are_released_unless_kept_and_a_reservation_keeps_them_by_default() -> None:
    plain = GpuNodesConfig(count=2)
    assert (min_size(plain), max_size(plain), autoscaled(plain), releases_idle_nodes(plain)) == (0, 3, True, True)
    reserved = GpuNodesConfig(count=2, capacity_reservation_id=RESERVATION, availability_zone="us-east-1a")
    assert (min_size(reserved), max_size(reserved), releases_idle_nodes(reserved)) == (2, 3, False)
    released = GpuNodesConfig(count=2, capacity_reservation_id=RESERVATION, keep_idle_nodes=False)
    assert min_size(released) == 0


def test_a_group_with_no_room_to_move_is_not_autoscaled() -> None:
    fixed = GpuNodesConfig(count=2, spares=0, keep_idle_nodes=True)
    assert (min_size(fixed), max_size(fixed), autoscaled(fixed)) == (2, 2, False)
    empty = GpuNodesConfig(count=0, spares=0)
    assert max_size(empty) == 1 and not releases_idle_nodes(empty)  # EKS requires a max of at least 1


def test_the_template_tags_state_what_only_the_device_plugin_and_user_data_give() -> None:
    tags = node_template_tags(GpuNodesConfig(instance_type="p5.48xlarge"))
    assert tags == {
        f"{NODE_TEMPLATE_RESOURCE_TAG}vpc.amazonaws.com/efa": "32",
        f"{NODE_TEMPLATE_RESOURCE_TAG}hugepages-2Mi": "10256Mi",
    }
    assert node_template_tags(GpuNodesConfig(instance_type="g6e.xlarge")) == {}  # no EFA: GPUs come from the type
