"""Fixed costs a hardware spec may omit (per kernel, per collective call, per step, per
scale-out step): each gets a documented estimate for its class of device, never an implicit
zero; and the record of the silicon a design pays for beyond what it enables (its die's
spares). The rules that read a HardwareSpec are in dse.spec.hardware_costs. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class FixedCost(NamedTuple):
    """A documented fixed cost: seconds and where the figure comes from."""

    seconds: float
    source: str


# Fixed costs a spec may omit, by compute style (None: style not stated), each a documented
# estimate for the class of device, never an implicit zero. A spec that omits one is charged
# this at load (`HardwareSpec.estimated` names which; `dse show` marks them); an explicit
# value, 0 included, is the user's statement and is kept. Interconnect figures do not depend
# on the style (one row, None).
FIXED_COST_DEFAULTS: dict[str, dict[str | None, FixedCost]] = {
    "compute.op_overhead": {
        "gpu": FixedCost(2.0e-6, "GPU-class estimate: the shortest stream-launched small "
                         "kernel measured on GPUs, MI210 (ROCm 6.0) 2.0 us and H100 2.1 us; "
                         "A100 2.6, H200 2.4 (te42kyfo/gpu-benches gpu-small-kernels, "
                         "cdcc732), B200 3.8 (Mirage, arXiv 2512.22219)"),
        "array": FixedCost(1.0e-6, "array-class estimate: a device-sequenced operator, "
                           "between MTIA v2's job launch under 1 us (Meta, Hot Chips 2024) "
                           "and 1.3 us per kernel replayed from a CUDA graph on A100 "
                           "(te42kyfo/gpu-benches gpu-small-kernels, cdcc732)"),
        None: FixedCost(2.0e-6, "style not stated: charged the GPU-class estimate (the "
                        "shortest stream-launched small kernel measured on GPUs, 2.0 us)"),
    },
    "interconnect.latency": {
        None: FixedCost(0.6e-6, "estimate: NCCL's per-step latency over NVLink (ring, LL "
                        "protocol; NVIDIA/nccl src/graph/tuning.cc), the lowest of the "
                        "documented links: xGMI 0.8 (RCCL), PCIe 1.0 (NCCL), TPU ICI ~1 "
                        "(JAX scaling book), network 2.7 (NCCL)"),
    },
    "interconnect.collective_overhead": {
        None: FixedCost(6.6e-6, "estimate: NCCL's base latency per collective call (ring, "
                        "LL protocol; NVIDIA/nccl src/graph/tuning.cc), the lowest of the "
                        "documented libraries (RCCL 12 us)"),
    },
    "interconnect.scale_out_latency": {
        None: FixedCost(2.7e-6, "estimate: NCCL's per-step latency over an InfiniBand or "
                        "RoCE network (ring, LL protocol; NVIDIA/nccl src/graph/tuning.cc)"),
    },
}


def fixed_cost_default(path: str, style: str | None) -> FixedCost:
    """The documented default of the fixed cost at `path` (a FIXED_COST_DEFAULTS key) for a
    chip of compute style `style`."""
    row = FIXED_COST_DEFAULTS[path]
    return row.get(style, row[None])


@dataclass(frozen=True)
class Spares:
    """What a die carries beyond what its product enables (harvesting spares fused off for
    yield, an HBM site left empty), as ratios as built / enabled: `units`, per memory level
    name its `capacity`, `stacks` and `channels`, `links`; and `idle_links`, the links on
    the die where the product enables none (a PCIe card whose die carries NVLink). The
    area model multiplies each enabled count by its ratio."""

    units: float = 1.0
    levels: dict[str, dict[str, float]] = field(default_factory=dict)
    links: float = 1.0
    idle_links: float = 0.0
