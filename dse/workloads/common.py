"""Tables and helpers that every workload kind and the model share: the data types of each
precision name, the byte-counting conventions, and the attention pair count. They live here,
below the kind modules, so that no kind imports another (the independence contract in
pyproject.toml)."""

from __future__ import annotations

from dataclasses import dataclass

# Weight, activation, KV-cache data types and the compute data type of each precision name.
PRECISIONS = {
    "fp32": ("fp32", "fp32", "fp32", "fp32"),
    "bf16": ("bf16", "bf16", "bf16", "bf16"),
    "fp16": ("fp16", "fp16", "fp16", "fp16"),
    "fp8": ("fp8", "fp8", "fp8", "fp8"),
    "int8": ("int8", "int8", "int8", "int8"),
    "w8a16": ("int8", "fp16", "fp16", "fp16"),
    "w4a16": ("int4", "fp16", "fp16", "fp16"),
    "mixed": ("bf16", "bf16", "bf16", "bf16"),
    # 4-bit floating point with block scales (optable.DTYPE_BYTES): the linear layers'
    # weights and inputs in NVFP4 or MXFP4 at the chip's fp4 peak; the KV cache stays at
    # bf16 unless kv_precision says otherwise (NVIDIA's FP4 checkpoints quantize "only the
    # weights and activations of the linear operators within transformer blocks": model
    # cards of nvidia/Llama-3.1-405B-Instruct-FP4 and Llama-3.3-70B-Instruct-FP4). `fp4` is
    # NVFP4, as NVIDIA's performance tables and MLPerf submissions name it.
    "fp4": ("nvfp4", "nvfp4", "bf16", "nvfp4"),
    "nvfp4": ("nvfp4", "nvfp4", "bf16", "nvfp4"),
    "mxfp4": ("mxfp4", "mxfp4", "bf16", "mxfp4"),
}
# Precisions whose narrow type is the linear layers' alone: attention, norms, activation
# functions and the LM head run in bf16, and the layers' inputs are quantized as the GEMM
# reads them (a pass over a bf16 tensor, counted at its width), as the FP4 recipes run them.
LINEAR_ONLY = frozenset({"fp4", "nvfp4", "mxfp4"})


@dataclass(frozen=True)
class Counting:
    """How bytes are counted. The default uses each tensor's data type. The `paper`
    convention of Kim et al. (2023) counts every parameter and activation as 1 byte and only
    the Transformer layers (no embeddings, final norm or LM head)."""

    name: str = "default"
    element_bytes: float | None = None
    layers_only: bool = False


DEFAULT = Counting()
PAPER = Counting(name="paper", element_bytes=1.0, layers_only=True)
CONVENTIONS = {"default": DEFAULT, "paper": PAPER}


def attention_pairs(q_len: float, kv_len: float, causal: bool) -> float:
    """(query, key) pairs per head of one sequence whose queries are the last q_len of
    kv_len positions: all of them, or only keys at or before each query when causal."""
    if not causal:
        return q_len * kv_len
    return q_len * kv_len - q_len * (q_len - 1) / 2.0
