"""GPU health: the six DCGM exporter metrics per node and GPU, with a summary row on top, and the fabric as the
trainer's preflight measured it before step 1.

Series carry `Hostname` (the node name: the exporter's chart passes spec.nodeName as NODE_NAME) and `gpu` (the
device index on that node), so every panel reads "node, GPU". The fabric panels read the trainer's own gauges
(trainer/base/metrics/figures.py, the preflight_* keys, served by rank 0): one series per job, the slowest node's figure
for each level beside the figure the preflight expected (the catalog's, for the instance type).
"""

from __future__ import annotations

from typing import Any

from workloads.platform.dashboards.panels import Panel, Query, dashboard, label_variable
from workloads.platform.dashboards.training import metric

# The dcgm-exporter field names the dashboard reads; its default counters CSV exports all six. The memory-copy
# field is DCGM_FI_DEV_MEM_COPY_UTIL: "DCGM_FI_MEM_COPY_UTIL", as older notes spell it, is no DCGM field.
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # % of time a kernel ran
MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL"  # % of time device memory was read or written
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"  # the last XID error code seen (0: none)
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # degrees C
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # W
DCGM_METRICS = (GPU_UTIL, MEM_COPY_UTIL, XID_ERRORS, SM_CLOCK, GPU_TEMP, POWER_USAGE)

NODE = 'Hostname=~"$node"'
PER_GPU = "{{Hostname}} GPU {{gpu}}"


def _per_gpu(metric: str) -> Query:
    return Query(f"{metric}{{{NODE}}}", PER_GPU)


# The fabric preflight's figures (trainer/checks/fabric_preflight.py), by their metrics-file keys: nccl-tests' bus
# bandwidth in GB/s.
FABRIC_LEVELS = (
    ("preflight_intra_all_gather_gb_per_s", "all-gather within a node"),
    ("preflight_intra_reduce_scatter_gb_per_s", "reduce-scatter within a node"),
    ("preflight_inter_all_reduce_gb_per_s", "all-reduce across nodes, one rail"),
)
FABRIC_EXPECTED = (
    ("preflight_expected_intra_gb_per_s", "expected within a node"),
    ("preflight_expected_inter_gb_per_s", "expected across nodes"),
)
SLOWEST_FRACTION = "preflight_slowest_fraction"


def fabric_panels() -> list[Panel]:
    """The preflight's bus bandwidth per level beside what it expected, and the slowest node's share of it: a
    fraction below --preflight-min-fraction is a node the launcher ended with EXIT_BAD_NODE and tainted
    (docs/aws.md, "Bad nodes")."""
    measured = tuple(Query(metric(key), f"{label} {{{{pod}}}}") for key, label in FABRIC_LEVELS)
    expected = tuple(Query(metric(key), label) for key, label in FABRIC_EXPECTED)
    return [
        Panel(
            "Fabric: slowest node's share of the expected bus bandwidth",
            (Query(metric(SLOWEST_FRACTION), "{{pod}}"),),
            unit="percentunit",
            kind="stat",
            width=6,
            height=6,
            description="The fabric preflight before step 1 (trainer/checks/fabric_preflight.py): the slowest node's "
            "figure over the catalog's expected figure, or over the median node's, the lowest over the levels. Below "
            "--preflight-min-fraction the node's pod exits 201 and its node is tainted fsdp-eks/bad-node.",
        ),
        Panel(
            "Fabric: preflight bus bandwidth",
            (*measured, *expected),
            unit="GBs",  # Grafana's gigabytes/sec, 1e9 B/s (grafana-data valueFormats/categories.ts), as the keys' GB/s
            kind="stat",  # one figure per start of the workers: the last one is what the job runs on
            width=18,
            height=6,
            description="nccl-tests' bus bandwidth (NVIDIA/nccl-tests PERFORMANCE.md) of each collective the "
            "trainer runs, measured once per start of the workers: the slowest node's within a node (NVLink), "
            "the slowest rail's across nodes (EFA), beside the expected figures. NaN: a level that does not "
            "apply (one GPU a node, one node).",
        ),
    ]


def gpu_health_dashboard() -> dict[str, Any]:
    panels = [
        Panel(
            "GPUs reporting",
            (Query(f"count({GPU_UTIL}{{{NODE}}})"),),
            kind="stat",
            width=6,
            height=4,
            description="GPUs the DCGM exporter reports on the selected nodes.",
        ),
        Panel(
            "Mean GPU utilisation",
            (Query(f"avg({GPU_UTIL}{{{NODE}}})"),),
            unit="percent",
            kind="stat",
            width=6,
            height=4,
        ),
        Panel(
            "GPUs with an XID error",
            (Query(f"count({XID_ERRORS}{{{NODE}}} > 0) or vector(0)"),),
            kind="stat",
            width=6,
            height=4,
            description="XIDs are driver-reported GPU faults; any non-zero code needs a look "
            "(NVIDIA's XID catalog says which are fatal).",
        ),
        Panel(
            "Total GPU power", (Query(f"sum({POWER_USAGE}{{{NODE}}})"),), unit="watt", kind="stat", width=6, height=4
        ),
        Panel(
            "GPU utilisation",
            (_per_gpu(GPU_UTIL),),
            unit="percent",
            description="Share of time one or more kernels ran. Low during training means input, communication "
            "or host stalls.",
        ),
        Panel(
            "Memory copy utilisation",
            (_per_gpu(MEM_COPY_UTIL),),
            unit="percent",
            description="Share of time device memory was being read or written.",
        ),
        Panel(
            "SM clock",
            (_per_gpu(SM_CLOCK),),
            unit="suffix: MHz",
            description="A clock dropping under load points at power or thermal throttling.",
        ),
        Panel("GPU temperature", (_per_gpu(GPU_TEMP),), unit="celsius"),
        Panel("Power draw", (_per_gpu(POWER_USAGE),), unit="watt"),
        Panel(
            "XID errors",
            (_per_gpu(XID_ERRORS),),
            description="The last XID code reported per GPU; 0 means none since the exporter started.",
        ),
        Panel(
            "Last XID per GPU",
            (Query(f"max by (Hostname, gpu) ({XID_ERRORS}{{{NODE}}}) > 0", instant=True),),
            kind="table",
            width=24,
            height=6,
            description="GPUs whose last XID is non-zero, now.",
        ),
        *fabric_panels(),
    ]
    return dashboard(
        uid="fsdp-eks-gpu-health",
        title="fsdp-eks / GPU health",
        description="DCGM exporter metrics per node and GPU; the fabric as the trainer's preflight measured it.",
        panels=panels,
        variables=[label_variable("node", GPU_UTIL, "Hostname")],
    )
