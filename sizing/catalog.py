"""Facts per EC2 instance type, in one table used by the config checks, the GPU node group, the job and the sizing.

Sources, per column (checked against the public pages named here; the catalog is the only file that spells them):
- GPUs, GPU memory, vCPUs, host memory, network bandwidth: the EC2 "Accelerated computing" instance type
  specifications (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html).
- Network cards and EFA interfaces: the same page's "Network specifications" table (maximum network cards, EFA
  support) and the EC2 guide "Maximize network bandwidth on instances with multiple network cards", which
  asks for one EFA interface per network card on these types.
- NVLink bandwidth per GPU: NVIDIA's A100 / H100 / H200 SXM datasheets (NVLink 3: 600 GB/s, NVLink 4: 900 GB/s).
- Peak dense bf16 FLOP/s: per chip, in trainer/base/hardware/chips.py (NVIDIA datasheets, no sparsity).
- On-demand price: a fallback only. A preview reads the current price from AWS's Price List API
  (stack/price_list.py, infra/prices.py) and uses this figure, labelled as the catalog's and dated CATALOG_PRICES_SET,
  only when that call fails. AWS EC2 on-demand pricing, US East (N. Virginia), Linux, per instance-hour, as AWS listed
  it before June 2025, when it lowered P4 and P5 on-demand prices (up to 45% for P5): the figures overstate P4 and
  P5. `gpuNodes.pricePerHour` (a reservation's or savings plan's price) overrides both.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.base.hardware.chips import PEAK_BF16_FLOPS

# The day the price column was set (the project's first commit of the catalog), from AWS's list prices of before its
# June 2025 P4 and P5 price cut.
CATALOG_PRICES_SET = "2026-12-02"


@dataclass(frozen=True)
class InstanceType:
    """What the project needs to know about one EC2 instance type."""

    name: str
    gpu_chip: str  # key into trainer.base.hardware.chips.PEAK_BF16_FLOPS
    gpus: int
    gpu_memory_gib: int  # per GPU
    vcpus: int
    memory_gib: int  # host memory
    network_cards: int
    efa_interfaces: int  # maximum EFA interfaces; 0 where EFA is not supported
    efa_only_supported: bool  # whether the type accepts `efa-only` interfaces (no IP address, EFA traffic only)
    # EFA reads and writes GPU memory directly (GPUDirect RDMA, FI_EFA_USE_DEVICE_RDMA=1): the P4 and P5 families
    # (EC2 EFA guide, "Supported instance types" with RDMA read/write); L40S nodes stage through host memory.
    gpudirect_rdma: bool
    network_gbps: int
    nvlink_gb_per_s: int  # per GPU, NVIDIA's figure: both directions summed over links; 0 where PCIe only
    price_per_hour_usd: float

    @property
    def supports_efa(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def peak_bf16_flops_per_gpu(self) -> float:
        return PEAK_BF16_FLOPS[self.gpu_chip]


CATALOG: dict[str, InstanceType] = {
    t.name: t
    for t in (
        # 8x A100 40 GB, 4 network cards with one EFA each (4 x 100 Gbps), NVSwitch.
        InstanceType(
            name="p4d.24xlarge",
            gpu_chip="A100-SXM",
            gpus=8,
            gpu_memory_gib=40,
            vcpus=96,
            memory_gib=1152,
            network_cards=4,
            efa_interfaces=4,
            efa_only_supported=False,
            gpudirect_rdma=True,
            network_gbps=400,
            nvlink_gb_per_s=600,
            price_per_hour_usd=32.77,
        ),
        # 8x A100 80 GB; otherwise as p4d. The reference experiment's 16-node A100 point.
        InstanceType(
            name="p4de.24xlarge",
            gpu_chip="A100-SXM",
            gpus=8,
            gpu_memory_gib=80,
            vcpus=96,
            memory_gib=1152,
            network_cards=4,
            efa_interfaces=4,
            efa_only_supported=False,
            gpudirect_rdma=True,
            network_gbps=400,
            nvlink_gb_per_s=600,
            price_per_hour_usd=40.97,
        ),
        # 8x H100 80 GB, 32 network cards with one EFA each (32 x 100 Gbps = 3200 Gbps), NVSwitch.
        InstanceType(
            name="p5.48xlarge",
            gpu_chip="H100-SXM",
            gpus=8,
            gpu_memory_gib=80,
            vcpus=192,
            memory_gib=2048,
            network_cards=32,
            efa_interfaces=32,
            efa_only_supported=True,
            gpudirect_rdma=True,
            network_gbps=3200,
            nvlink_gb_per_s=900,
            price_per_hour_usd=98.32,
        ),
        # 8x H200 141 GB, network as p5.
        InstanceType(
            name="p5e.48xlarge",
            gpu_chip="H200-SXM",
            gpus=8,
            gpu_memory_gib=141,
            vcpus=192,
            memory_gib=2048,
            network_cards=32,
            efa_interfaces=32,
            efa_only_supported=True,
            gpudirect_rdma=True,
            network_gbps=3200,
            nvlink_gb_per_s=900,
            price_per_hour_usd=108.50,
        ),
        # 8x H200 141 GB, 16 network cards with EFAv3 (16 x 200 Gbps = 3200 Gbps).
        InstanceType(
            name="p5en.48xlarge",
            gpu_chip="H200-SXM",
            gpus=8,
            gpu_memory_gib=141,
            vcpus=192,
            memory_gib=2048,
            network_cards=16,
            efa_interfaces=16,
            efa_only_supported=True,
            gpudirect_rdma=True,
            network_gbps=3200,
            nvlink_gb_per_s=900,
            price_per_hour_usd=84.80,
        ),
        # 8x L40S 48 GB over PCIe, 4 network cards with EFA (400 Gbps): the cheaper multi-node dev type.
        InstanceType(
            name="g6e.48xlarge",
            gpu_chip="L40S",
            gpus=8,
            gpu_memory_gib=48,
            vcpus=192,
            memory_gib=1536,
            network_cards=4,
            efa_interfaces=4,
            efa_only_supported=True,
            gpudirect_rdma=False,
            network_gbps=400,
            nvlink_gb_per_s=0,
            price_per_hour_usd=30.13,
        ),
        # 1x L40S 48 GB, no EFA: the smallest GPU node, for a single-node smoke test of the stack.
        InstanceType(
            name="g6e.xlarge",
            gpu_chip="L40S",
            gpus=1,
            gpu_memory_gib=48,
            vcpus=4,
            memory_gib=32,
            network_cards=1,
            efa_interfaces=0,
            efa_only_supported=False,
            gpudirect_rdma=False,
            network_gbps=20,
            nvlink_gb_per_s=0,
            price_per_hour_usd=1.86,
        ),
    )
}


def instance_type(name: str) -> InstanceType:
    """The catalog entry for `name`; raises KeyError naming the types the catalog knows."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown instance type {name!r}; known: {', '.join(sorted(CATALOG))}") from None
