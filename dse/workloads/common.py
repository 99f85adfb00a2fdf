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
}


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
