"""One DCGM host engine per GPU node: on the stack's own cluster the DCGM exporter reads the node monitoring agent's
host engine instead of starting one of its own (workloads/platform/monitoring.py); the agent's runs on the GPU nodes
(its dcgmAgent tolerates their taint, infra/addons.py)."""

from __future__ import annotations

import dataclasses

from infra.addons import NODE_MONITORING_AGENT, cluster_addons
from stack.files import load_stack_config
from stack.names import GPU_TAINT_KEY
from workloads.platform.monitoring import DCGM_EXPORTER_COUNTERS, HOST_ENGINE_PORT, dcgm_exporter_values


def test_the_exporter_on_the_stacks_cluster_connects_to_the_agents_host_engine_on_its_node() -> None:
    values = dcgm_exporter_values(load_stack_config("p5-2"))
    assert values["arguments"] == [*DCGM_EXPORTER_COUNTERS, "-r", f"$(NODE_IP):{HOST_ENGINE_PORT}"]
    assert values["extraEnv"] == [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}]
    assert NODE_MONITORING_AGENT in cluster_addons(with_fsx=True)
    (toleration,) = NODE_MONITORING_AGENT.configuration["dcgmAgent"]["tolerations"]
    assert toleration["key"] == GPU_TAINT_KEY


def test_on_an_existing_cluster_the_exporter_keeps_its_own_host_engine() -> None:
    config = load_stack_config("p5-2")
    existing = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, existing=True))
    values = dcgm_exporter_values(existing)
    assert "arguments" not in values and "extraEnv" not in values
