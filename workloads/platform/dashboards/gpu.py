"""GPU health: the six DCGM exporter metrics per node and GPU, with a summary row on top.

Series carry `Hostname` (the node name: the exporter's chart passes spec.nodeName as NODE_NAME) and `gpu` (the
device index on that node), so every panel reads "node, GPU".
"""

from __future__ import annotations

from typing import Any

from workloads.platform.dashboards.panels import Panel, Query, dashboard, label_variable

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
    ]
    return dashboard(
        uid="fsdp-eks-gpu-health",
        title="fsdp-eks / GPU health",
        description="DCGM exporter metrics per node and GPU.",
        panels=panels,
        variables=[label_variable("node", GPU_UTIL, "Hostname")],
    )
