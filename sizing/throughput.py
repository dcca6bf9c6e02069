"""Expected training throughput of an FSDP2 job on a fleet, and its scaling efficiency against one node.

A micro step's time is its compute plus the part of its communication that does not hide behind compute:
- compute: the trainer's own FLOPs per token (trainer.base.metrics.figures.training_flops_per_token: 6N + 12LHT, PaLM,
  Chowdhery et al. 2022, appendix B) times the tokens of a micro step, plus what activation checkpointing recomputes
  (recompute_share: the decoder layers' forward again under full, three of the seven projections under
  selective-mm), at `mfu` of the chip's peak bf16 FLOP/s (sizing/catalog.py).
  `mfu` is an assumption (see default_mfu; --compile shortens its element-wise part, COMPILED_ELEMENTWISE); the
  trainer reports the real figure as `mfu` in its metrics;
- communication per micro step: FSDP all-gathers each layer's parameters in the compute dtype for forward and,
  when it resharded them, again for backward; it reduce-scatters fp32 gradients every micro step; HYBRID_SHARD and
  NO_SHARD all-reduce the fp32 gradient shards across replicas on an optimizer step's last micro step only (in bf16
  under --all-reduce-dtype bf16, half the bytes: trainer/parallel/all_reduce.py).
  Collective times follow the ring model of nccl-tests' PERFORMANCE.md (all-gather and reduce-scatter move
  (n-1)/n of the buffer, all-reduce twice that) over the slowest link the ring crosses;
- overlap: FSDP2 prefetches the next layer's all-gather and reduce-scatters on their own streams, so a layer's
  communication runs under the neighbouring layers' compute. Forward communication hides under forward compute,
  backward communication under backward compute; only the excess is exposed, plus what cannot overlap at all:
  the embedding's all-gather before the first layer and its reduce-scatter (and all-reduce) after the last. The
  model charges the head's (final norm, output layer) the same way, though it overlaps with the layers'
  (trainer/parallel/parallelize.py): conservative by under 1% of a step for Llama 2 7B on p5.
  Overlapped communication still takes SMs and memory bandwidth from compute: `overlap_cost` of its time is
  charged to the step (an assumption).
Not modelled: the optimizer step (a few ms of memory-bound work per step), data loading, stragglers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sizing.catalog import InstanceType
from sizing.memory import (
    FP32,
    Job,
    Ranks,
    adapter_parameters,
    adapter_shapes,
    layer_parameter_shapes,
    numel,
    root_parameter_shapes,
)
from trainer.base.hardware.chips import HBM_BYTES_PER_S, PEAK_BF16_FLOPS
from trainer.base.metrics.figures import training_flops_per_token
from trainer.base.model.presets import ModelShape
from trainer.base.units import DTYPE_BYTES

# Compute efficiency: the fraction of peak bf16 FLOP/s a GPU reaches on the model's math when communication costs
# nothing. The matrix multiplies run at a fixed fraction of peak per chip; the element-wise work between them
# (norms, RoPE, SiLU, residual adds, the loss) is memory-bound, O(h) bytes per token against the multiplies' O(h^2)
# FLOPs, and costs what ELEMENTWISE_WIDTH more columns of multiplies would cost on an A100, scaled on other chips by
# their ratio of peak FLOP/s to memory bandwidth (trainer/base/hardware/chips.py). So mfu(h) = matmul_efficiency * h /
# (h + w): wide models run nearer peak. Calibrated against published FSDP runs (sizing/published.py, the table in
# docs/sizing.md), as the mfu at h = 4096: A100s 0.63 (torchtitan's and IBM's Llama 2 runs, 7B to 70B, all within
# 2% with w = 1500 columns, where a width-blind constant left the 70B runs 15-18% off), H100s 0.35 (torchtitan's
# Llama 3.1 8B without compile). H200 is H100's die with more memory bandwidth. L40S keeps an unmeasured 0.35.
# Override with --mfu, or better, with the `mfu` the trainer measures on a one-node run.
ELEMENTWISE_WIDTH = 1500
REFERENCE_WIDTH = 4096
CALIBRATED_MFU = {"A100-SXM": 0.63, "H100-SXM": 0.35, "L40S": 0.35}
SAME_DIE = {"H200-SXM": "H100-SXM"}
# GPUs without NVLink talk over PCIe 4.0 x16: 32 GB/s per direction (PCI-SIG), GB = 1e9 bytes.
PCIE_GB_PER_S = 32
# NCCL's latency model (src/graph/tuning.cc): a base cost per collective and a per-step cost per hop of the ring,
# about 0.6 us over NVLink and 5 us over the network (simple protocol, rounded).
COLLECTIVE_BASE_S = 7e-6
HOP_S = {"nvlink": 0.6e-6, "network": 5e-6}


# torch.compile of each decoder layer (--compile) fuses its element-wise operations into fewer kernels, so fewer
# passes over memory; the matmuls are the same kernels. torchtitan's Llama 3.1 8B on H100s with selective checkpointing
# ran 1.157x (8 GPUs) and 1.162x (128 GPUs) the tokens/s with compile (pytorch/torchtitan
# benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3: 6,667 / 5,762 and 6,514 / 5,605). This model gives
# those ratios at h = 4096 on H100 when compile leaves 0.672 and 0.663 of the element-wise width: 2/3. An assumption
# for our trainer until bench/gpu_mfu.py measures it with and without --compile.
COMPILED_ELEMENTWISE = 2 / 3


def elementwise_width(chip: str, compiled: bool = False) -> float:
    """Columns of matrix multiply that cost as much time as a layer's element-wise work on `chip` (compiled: fused)."""
    a100 = PEAK_BF16_FLOPS["A100-SXM"] / HBM_BYTES_PER_S["A100-SXM"]
    fused = COMPILED_ELEMENTWISE if compiled else 1.0
    return ELEMENTWISE_WIDTH * fused * (PEAK_BF16_FLOPS[chip] / HBM_BYTES_PER_S[chip]) / a100


def default_mfu(chip: str, hidden_size: int, compiled: bool = False) -> float:
    """The compute efficiency assumed for a model of width `hidden_size` on `chip` (see CALIBRATED_MFU, calibrated
    on eager runs; compiled: with COMPILED_ELEMENTWISE of the element-wise time)."""
    calibrated = SAME_DIE.get(chip, chip)
    reference = REFERENCE_WIDTH / (REFERENCE_WIDTH + elementwise_width(calibrated))
    matmul_efficiency = CALIBRATED_MFU[calibrated] / reference
    return matmul_efficiency * hidden_size / (hidden_size + elementwise_width(chip, compiled))


def recomputed_matmul_share(shape: ModelShape, seq_len: int) -> float:
    """The share of a decoder layer's forward matmul FLOPs that selective-mm recomputes: k, o and up, every second of
    the projections q, k, v, o, gate, up, down (trainer/parallel/parallelize.py), against the seven and attention's
    scores and weighted values (4HT a token, PaLM's 12LHT over forward and backward)."""
    h, i, q, kv = shape.hidden_size, shape.intermediate_size, shape.q_width, shape.kv_width
    projections = 2 * (h * q + 2 * h * kv + q * h + 3 * h * i)
    recomputed = 2 * (h * kv + q * h + h * i)
    return recomputed / (projections + 4 * q * seq_len)


def recompute_share(job: Job, chip: str) -> float:
    """What activation checkpointing recomputes in backward, as a share of the forward's time.

    full: the whole forward again. selective (trainer/parallel/parallelize.py's policy keeps every matmul and
    attention output, recomputes the element-wise operations): nothing more than the calibration holds, since
    CALIBRATED_MFU's H100 figure comes from torchtitan's runs with the same selective policy, so its element-wise
    recompute is inside that mfu (on A100, calibrated without it, a selective job is charged that little too
    little). selective-mm: selective's, and the three projections it recomputes, at the matmuls' own speed (the part
    of a layer's time that is not element-wise in default_mfu's terms, h / (h + w)).
    """
    mode = job.activation_checkpointing
    if mode in ("none", "selective"):
        return 0.0
    if mode == "full":
        return 1.0
    h = job.shape.hidden_size
    width = elementwise_width(chip, job.compile)
    return h / (h + width) * recomputed_matmul_share(job.shape, job.seq_len)


@dataclass(frozen=True)
class MeasuredFabric:
    """Bus bandwidth the trainer's fabric preflight measured on the job's nodes (GB/s of 1e9 bytes; its metrics'
    preflight_* fields, trainer/base/metrics/figures.py), to use instead of the catalog's links (see _links)."""

    intra_gb_per_s: float | None = None
    """Within a node: the lower of the all-gather's and the reduce-scatter's, the slowest node's."""
    inter_rail_gb_per_s: float | None = None
    """Across nodes on one rail (the all-reduce of one GPU per node, every rail at once): a GPU's share of the node's
    network."""


@dataclass(frozen=True)
class Assumptions:
    mfu: float | None = None
    """Fraction of peak the math reaches; None: default_mfu for the chip and the model's width."""
    nvlink_efficiency: float = 0.8
    """Fraction of the one-direction NVLink (or PCIe) bandwidth NCCL reaches (nccl-tests bus bandwidth)."""
    network_efficiency: float = 0.8
    """Fraction of the instance's network bandwidth NCCL reaches over EFA (aws-ofi-nccl)."""
    overlap_cost: float = 0.1
    """Share of overlapped communication time that still slows compute."""
    measured: MeasuredFabric | None = None
    """The links as the fabric preflight measured them, instead of the catalog's figures times the efficiencies."""


@dataclass(frozen=True)
class ThroughputEstimate:
    nodes: int
    gpus: int
    compute_s: float
    """One micro step's compute on one GPU."""
    communication_s: float
    """A micro step's communication, as if nothing overlapped (the mean over an optimizer step's micro steps)."""
    exposed_s: float
    """Communication time a micro step waits for, including the overlap cost (the mean, likewise)."""
    micro_step_s: float
    step_s: float
    """One optimizer step: grad_accum micro steps."""
    tokens_per_second: float
    tokens_per_second_per_gpu: float
    mfu: float
    """Model FLOPs utilisation: what the trainer would report as `mfu`."""


@dataclass(frozen=True)
class _Link:
    bytes_per_s: float
    hop: str


def _links(instance: InstanceType, nodes: int, assumptions: Assumptions) -> tuple[_Link, _Link]:
    """(within a node, across nodes) for one ring collective. NVIDIA's NVLink figure (900 GB/s on H100, 600 on
    A100) counts both directions (the A100 architecture whitepaper: 12 links of 25 GB/s per direction); a ring
    uses one. Across nodes, NCCL runs one ring channel per NIC, so a ring over whole nodes moves data at the node's
    network bandwidth (network_gbps, bits). A measured figure replaces the catalog's: nccl-tests' bus bandwidth is
    the link speed of this ring model (busbw = S/t x (n-1)/n, PERFORMANCE.md, and _ring's time is (n-1)/n x S over
    the link), and a rail's all-reduce, every rail at once, is a GPU's share of the node's network."""
    expected_intra, expected_rail = _expected_gb_per_s(instance, assumptions)
    measured = assumptions.measured or MeasuredFabric()
    intra = _Link((measured.intra_gb_per_s or expected_intra) * 1e9, "nvlink")
    network = (measured.inter_rail_gb_per_s or expected_rail) * 1e9 * instance.gpus
    inter = _Link(min(network, intra.bytes_per_s), "network") if nodes > 1 else intra
    return intra, inter


def expected_fabric(instance: InstanceType, assumptions: Assumptions | None = None) -> MeasuredFabric:
    """The bus bandwidth (GB/s) the catalog and the efficiencies expect of `instance`, as the fabric preflight
    measures it: within a node (a ring uses one direction of NVLink, or PCIe), and on one rail across nodes (the
    node's network, network_gbps in bits, shared by its GPUs). What the stack passes the trainer as
    --preflight-expect-intra-gb-per-s and --preflight-expect-inter-gb-per-s, and what the model assumes unmeasured."""
    return MeasuredFabric(*_expected_gb_per_s(instance, assumptions or Assumptions()))


def _expected_gb_per_s(instance: InstanceType, assumptions: Assumptions) -> tuple[float, float]:
    one_direction = instance.nvlink_gb_per_s / 2 if instance.nvlink_gb_per_s else PCIE_GB_PER_S
    network = instance.network_gbps / 8 * assumptions.network_efficiency
    return one_direction * assumptions.nvlink_efficiency, network / instance.gpus


def _ring(buffer_bytes: float, ranks: int, link: _Link, all_reduce: bool = False) -> float:
    """Seconds for an all-gather / reduce-scatter of a `buffer_bytes` (unsharded) buffer over `ranks`, or an
    all-reduce of a `buffer_bytes` buffer on every rank."""
    if ranks <= 1:
        return 0.0
    steps = (2 if all_reduce else 1) * (ranks - 1)
    return COLLECTIVE_BASE_S + steps * HOP_S[link.hop] + steps / ranks * buffer_bytes / link.bytes_per_s


def estimate_throughput(
    job: Job, instance: InstanceType, nodes: int, assumptions: Assumptions | None = None
) -> ThroughputEstimate:
    """Throughput of `job` (per GPU micro batch, strategy, checkpointing) on `nodes` nodes of `instance`."""
    assumptions = assumptions or Assumptions()
    shape, e = job.shape, job.compute_bytes
    chip = instance.gpu_chip
    mfu = assumptions.mfu if assumptions.mfu is not None else default_mfu(chip, shape.hidden_size, job.compile)
    adapters = adapter_parameters(shape, job.lora_rank, job.lora_targets)
    flops_per_token = training_flops_per_token(shape, job.seq_len, adapters)
    # Forward is 2N + 4LHT (+ 2A under LoRA): a third of full fine-tuning's 6N + 12LHT.
    forward_flops = training_flops_per_token(shape, job.seq_len) / 3 + 2.0 * adapters
    recompute = forward_flops * recompute_share(job, chip)  # the head's forward counted in too: conservative
    rate = instance.peak_bf16_flops_per_gpu * mfu
    forward_s = job.tokens * forward_flops / rate
    backward_s = job.tokens * (flops_per_token - forward_flops + recompute) / rate

    ranks = Ranks(nodes * instance.gpus, instance.gpus)
    shard, replicate = ranks.shard_size(job.sharding_strategy), ranks.replicate_size(job.sharding_strategy)
    intra, inter = _links(instance, nodes, assumptions)
    shard_link = inter if shard > instance.gpus else intra
    layer, root = numel(layer_parameter_shapes(shape)), numel(root_parameter_shapes(shape))
    # Under LoRA only the adapters' gradients are reduced; layers gather their adapters with their base.
    layer_adapters = numel(adapter_shapes(shape, job.lora_rank, job.lora_targets))
    layer_trained, root_trained = (layer_adapters, 0) if job.lora_rank else (layer, root)
    layer += layer_adapters
    layers = shape.num_layers
    resharded = job.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD")  # trainer/parallel/parallelize.py

    def gather(params: int) -> float:
        return _ring(e * params, shard, shard_link)

    # HYBRID_SHARD: each GPU all-reduces its shard with the same GPU of every other node, and a node's GPUs do so
    # at once, sharing its network. NO_SHARD: one ring over every GPU, like FULL_SHARD's.
    replica_link = _Link(inter.bytes_per_s / instance.gpus, "network") if shard > 1 else inter

    all_reduced = DTYPE_BYTES[job.all_reduce_dtype]  # bytes per element of the all-reduce across replicas

    def reduce(params: int, across_replicas: bool) -> float:
        scatter = _ring(FP32 * params, shard, shard_link)
        return scatter + (
            _ring(all_reduced * params / shard, replicate, replica_link, all_reduce=True) if across_replicas else 0
        )

    def micro_step(last: bool) -> tuple[float, float]:
        """(communication, exposed communication) of a micro step; only the last all-reduces across replicas."""
        forward_comm = layers * gather(layer)
        backward_comm = layers * ((gather(layer) if resharded else 0.0) + reduce(layer_trained, last))
        unhidden = gather(root) + reduce(root_trained, last)
        exposed = max(0.0, forward_comm - forward_s) + max(0.0, backward_comm - backward_s) + unhidden
        overlapped = min(forward_comm, forward_s) + min(backward_comm, backward_s)
        return forward_comm + backward_comm + unhidden, exposed + assumptions.overlap_cost * overlapped

    # Gradient accumulation all-reduces across replicas once per optimizer step, on the last micro step; the others
    # only reduce-scatter within their shard group (trainer/train.py, FSDP2's set_requires_all_reduce).
    compute_s = forward_s + backward_s
    last, other = micro_step(last=True), micro_step(last=False)
    others = job.grad_accum - 1
    communication_s = (last[0] + others * other[0]) / job.grad_accum
    exposed = (last[1] + others * other[1]) / job.grad_accum
    micro_step_s = compute_s + exposed
    gpus = nodes * instance.gpus
    per_gpu = job.tokens / micro_step_s
    return ThroughputEstimate(
        nodes=nodes,
        gpus=gpus,
        compute_s=compute_s,
        communication_s=communication_s,
        exposed_s=exposed,
        micro_step_s=micro_step_s,
        step_s=job.grad_accum * micro_step_s,
        tokens_per_second=per_gpu * gpus,
        tokens_per_second_per_gpu=per_gpu,
        mfu=per_gpu * flops_per_token / instance.peak_bf16_flops_per_gpu,
    )


def scaling_efficiency(job: Job, instance: InstanceType, nodes: int, assumptions: Assumptions | None = None) -> float:
    """Per-GPU throughput on `nodes` nodes over that on one node (HYBRID_SHARD on one node is FULL_SHARD)."""
    one_node_job = replace(job, sharding_strategy="FULL_SHARD") if job.sharding_strategy == "HYBRID_SHARD" else job
    one = estimate_throughput(one_node_job, instance, 1, assumptions)
    many = estimate_throughput(job, instance, nodes, assumptions)
    return many.tokens_per_second_per_gpu / one.tokens_per_second_per_gpu


@dataclass(frozen=True)
class EvaluationEstimate:
    """One evaluation of the held-out set (the trainer's --eval-every): forward only, every rank its share."""

    held_out_tokens: int
    forwards: int
    """Micro batches (batch_size sequences of seq_len) each rank runs: the largest share, since FSDP2 needs every rank
    to run the same forwards (a rank with fewer sequences runs padding ones)."""
    forward_s: float
    """One forward micro batch, with the communication it waits for."""
    evaluation_s: float


def forward_flops_per_token(job: Job) -> float:
    """A forward's FLOPs per token, 2N + 4LHT (+ 2A under LoRA): a third of full fine-tuning's 6N + 12LHT."""
    adapters = adapter_parameters(job.shape, job.lora_rank, job.lora_targets)
    return training_flops_per_token(job.shape, job.seq_len) / 3 + 2.0 * adapters


def estimate_evaluation(
    job: Job, instance: InstanceType, nodes: int, held_out_tokens: int, assumptions: Assumptions | None = None
) -> EvaluationEstimate:
    """The time of one evaluation of `held_out_tokens` by `job` on `nodes` nodes of `instance`.

    Forward FLOPs per token are a third of full fine-tuning's 6N + 12LHT, 2N + 4LHT (+ 2A under LoRA), at the mfu
    training assumes; nothing is recomputed (no backward). FSDP2 all-gathers each layer for the forward as in training
    (trainer/parallel/parallelize.py): FULL_SHARD and HYBRID_SHARD reshard after every forward and gather again for
    the next, SHARD_GRAD_OP and NO_SHARD keep the gathered parameters until a backward (torch 2.13
    torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py FSDPParamGroup.reshard returns early without
    reshard_after_forward, and unshard is then a no-op), so with no backward they gather once per evaluation (the
    trainer reshards every unit after it, trainer/evaluation.py reshard). The layers' gathers hide under the forward's
    compute as in training's forward; the root's (embedding, final norm, output layer) is charged in full to every
    forward as training's is, though the output layer stays gathered through an evaluation: conservative. No gradient
    is reduced."""
    assumptions = assumptions or Assumptions()
    shape, e = job.shape, job.compute_bytes
    mfu = assumptions.mfu
    if mfu is None:
        mfu = default_mfu(instance.gpu_chip, shape.hidden_size, job.compile)
    compute_s = job.tokens * forward_flops_per_token(job) / (instance.peak_bf16_flops_per_gpu * mfu)

    ranks = Ranks(nodes * instance.gpus, instance.gpus)
    shard = ranks.shard_size(job.sharding_strategy)
    intra, inter = _links(instance, nodes, assumptions)
    link = inter if shard > instance.gpus else intra
    layer = numel(layer_parameter_shapes(shape)) + numel(adapter_shapes(shape, job.lora_rank, job.lora_targets))
    layers_s = shape.num_layers * _ring(e * layer, shard, link)
    root_s = _ring(e * numel(root_parameter_shapes(shape)), shard, link)  # before the first layer: never hidden
    sequences = math.ceil(held_out_tokens / job.seq_len)
    forwards = math.ceil(sequences / (ranks.world_size * job.batch_size))
    if job.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD"):
        exposed_s = max(0.0, layers_s - compute_s) + root_s + assumptions.overlap_cost * min(layers_s, compute_s)
        forward_s = compute_s + exposed_s
        evaluation_s = forwards * forward_s
    else:  # gathered once, by the first forward (charged as if it hid nothing), kept for the rest
        forward_s = compute_s
        evaluation_s = forwards * compute_s + (layers_s + root_s if forwards else 0.0)
    return EvaluationEstimate(held_out_tokens, forwards, forward_s, evaluation_s)
