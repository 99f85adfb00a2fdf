"""Lowering of a Transformer scenario into an operator table.

Counting rules (every one is a formula of the shapes; no fitted numbers):
- a multiply-add is 2 FLOPs: a GEMM of M x N x K costs 2*M*N*K (+ M*N for a bias add);
- Q, K, V and the output projection are separate GEMMs (each reads its input), as are the
  gate, up and down matrices of the FFN;
- attention counts (query, key) pairs: s*s for an encoder, s*(s+1)/2 for causal prefill,
  and the whole context for each generated token in decode (the KV cache grows by one entry
  per token, so a decode row holds the average context over the generation);
- each operator reads its inputs and writes its outputs once (unfused); where the data live
  and what a fused kernel keeps on chip is the performance model's business, not this one's;
- nonlinear operators cost a fixed number of FLOPs per element (`FLOP_PER_ELEMENT`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.spec.workload import Scenario, TransformerSpec, parameter_counts
from dse.workloads import training
from dse.workloads.common import DEFAULT, PRECISIONS, Counting, attention_pairs
from dse.workloads.optable import DTYPE_BYTES, Facts, Num, OpRow, OpTable
from dse.workloads.serving import Iteration, engine_of, iteration, kv_tokens

# FLOPs per element of the vector-unit operators (operation counts of the usual kernels).
# Softmax: subtract the row max, exp, accumulate the sum, divide = 4. LayerNorm: mean and
# variance accumulation, centring, squaring, normalising, scale and shift = 8. GELU (tanh
# form 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))) = 10. These reproduce the "Other" FLOPs of
# the Kim et al. (2023) case study exactly: its totals fix softmax at 4 per element and
# 2*LayerNorm + 4*GELU + 2*add at 58 per token-feature of a BERT/GPT-2 layer (8+8+40+2).
FLOP_PER_ELEMENT = {
    "softmax": 4.0,
    "layernorm": 8.0,
    "rmsnorm": 4.0,  # square, accumulate, normalise, scale
    "gelu": 10.0,
    "relu": 1.0,
    "silu": 4.0,  # x * sigmoid(x): exp, add, divide, multiply
    "swiglu": 5.0,  # silu(gate) * up
    "geglu": 11.0,  # gelu(gate) * up
    "residual": 1.0,
    "rope": 3.0,  # x*cos + rotate(x)*sin with precomputed tables: 2 multiplies, 1 add
}
# 4-bit weight-only quantization stores one fp16 scale per group of 128 weights (the default
# group size of GPTQ and AWQ): 0.5 + 2/128 bytes per weight.
INT4_GROUP_SIZE = 128


class Attention(NamedTuple):
    """One group of sequences whose attention runs as its own kernels: `repeat` instances
    per layer of `seqs` sequences, each with q_len queries over kv_len keys and `pairs`
    (query, key) pairs per head."""

    stage: str
    repeat: float | np.ndarray
    seqs: float | np.ndarray
    q_len: float
    kv_len: float
    pairs: float


class _Builder:
    """Accumulates rows for one stage with the model's sizes and byte widths at hand."""

    def __init__(self, m: TransformerSpec, sc: Scenario, counting: Counting):
        self.m, self.counting = m, counting
        w, a, kv, self.dtype = PRECISIONS[sc.precision]
        # Work other than the linear layers' GEMMs runs at this type: the same one, except
        # in FP8 training, where (Transformer Engine's FP8 recipe, as the activation planner
        # counts it: dse.model.activation_memory) only the linear layers' GEMMs run in FP8,
        # on FP8 casts of their inputs and weights, while activations between operators,
        # attention, norms, activation functions and the LM head stay in bf16 (TE docs,
        # "Using FP8 with Transformer Engine"; DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.1).
        # The linear layers read their inputs at the bf16 width: the cast of each input to
        # FP8 is a pass over it that the GEMM would otherwise save.
        self.other = self.dtype
        if phases.get(sc.phase).trains and sc.precision == "fp8":
            a, self.other = "bf16", "bf16"
        self.wdt = w
        kv = sc.kv_precision or kv
        eb = counting.element_bytes
        self.wb = eb or (DTYPE_BYTES[w] + (2.0 / INT4_GROUP_SIZE if w == "int4" else 0.0))
        self.ab = eb or DTYPE_BYTES[a]
        self.kvb = eb or DTYPE_BYTES[kv]
        self.rows: list[OpRow] = []
        self.ep = 1  # expert-parallel ranks sharing the experts (training)

    def gemm(self, name: str, group: str, count: Num, m: Num, n: Num, k: Num,
             stage: str, kind: str = "gemm", bias: bool | None = None,
             split: str = "column") -> None:
        bias = self.m.bias if bias is None else bias
        self.rows.append(OpRow(
            name, kind, group, count, 2 * m * n * k + (m * n if bias else 0.0),
            read={"weights": k * n * self.wb + (n * self.ab if bias else 0.0),
                  "activations": m * k * self.ab},
            written={"activations": m * n * self.ab}, m=m, n=n, k=k, batch=1, stage=stage,
            dtype=self.other if kind == "lm_head" else self.dtype, wdtype=self.wdt,
            split=split))

    def elementwise(self, name: str, kind: str, op: str, count: Num, elements: Num,
                    stage: str, inputs: int = 1, weights: Num = 0.0,
                    split: str = "replicated") -> None:
        self.rows.append(OpRow(
            name, kind, "other", count, FLOP_PER_ELEMENT[op] * elements,
            read={"activations": inputs * elements * self.ab, "weights": weights * self.wb},
            written={"activations": elements * self.ab}, stage=stage, dtype=self.other,
            split=split))

    def layer(self, stage: str, count: Num, tokens: Num, seqs: Num, q_len: float,
              kv_len: float, pairs: float, kv_new: Num,
              attention: tuple[Attention, ...] | None = None) -> None:
        """One Transformer layer, `count` times. tokens: rows of the GEMMs (batch x query
        length); pairs: (query, key) pairs per head per sequence; kv_new: KV entries each
        sequence appends. `attention`: groups of sequences whose attention runs apart (a
        serving iteration: the new prompts and the decode tokens); by default one group of
        `seqs` sequences with q_len, kv_len and pairs."""
        m, d = self.m, self.m.d_model
        h, kvh, dh = m.heads, m.n_kv_heads, m.d_head
        first = len(self.rows)
        cached = m.architecture == "decoder" and stage in ("prefill", "decode")
        kv_class = "kv_cache" if cached else "activations"
        norm_w = d * (2 if m.norm == "layernorm" and m.bias else 1)
        self.elementwise("attn_norm", "norm", m.norm, count, tokens * d, stage, weights=norm_w)
        self.gemm("q_proj", "attention_proj", count, tokens, h * dh, d, stage)
        for name in ("k_proj", "v_proj"):
            self.gemm(name, "attention_proj", count, tokens, kvh * dh, d, stage)
            if cached:
                row = self.rows[-1]  # the new K/V entries go to the cache, not to activations
                row.written = {"kv_cache": seqs * kv_new * kvh * dh * self.kvb}
        if m.position == "rope":
            self.elementwise("rope", "rope", "rope", count, tokens * (h + kvh) * dh, stage,
                             split="part")
        for a in attention or (Attention(stage, 1.0, seqs, q_len, kv_len, pairs),):
            self.attention(a, count, kv_class)
        self.gemm("o_proj", "attention_proj", count, tokens, d, h * dh, stage, split="row")
        self.elementwise("attn_residual", "residual", "residual", count, tokens * d, stage, 2)
        self.elementwise("ffn_norm", "norm", m.norm, count, tokens * d, stage, weights=norm_w)
        self.ffn(stage, count, tokens)
        self.elementwise("ffn_residual", "residual", "residual", count, tokens * d, stage, 2)
        for row in self.rows[first:]:
            row.layer = True

    def attention(self, a: Attention, count: Num, kv_class: str) -> None:
        """Scores, softmax and weighted values of one group of sequences, count x a.repeat
        times."""
        h, kvh, dh = self.m.heads, self.m.n_kv_heads, self.m.d_head
        count = count * a.repeat
        scores = a.seqs * h * a.pairs
        kv_read = a.seqs * kvh * a.kv_len * dh * self.kvb
        q_bytes = a.seqs * h * a.q_len * dh * self.ab
        self.rows.append(OpRow(
            "attn_score", "attention_score", "attention_act", count, 2 * scores * dh,
            read=_classes(("activations", q_bytes), (kv_class, kv_read)),
            written={"activations": scores * self.ab},
            m=a.q_len, n=a.kv_len, k=dh, batch=a.seqs * h, stage=a.stage, dtype=self.other,
            split="heads"))
        self.elementwise("softmax", "softmax", "softmax", count, scores, a.stage, split="part")
        self.rows.append(OpRow(
            "attn_value", "attention_value", "attention_act", count, 2 * scores * dh,
            read=_classes(("activations", scores * self.ab), (kv_class, kv_read)),
            written={"activations": q_bytes},
            m=a.q_len, n=dh, k=a.kv_len, batch=a.seqs * h, stage=a.stage, dtype=self.other,
            split="heads"))

    def ffn(self, stage: str, count: Num, tokens: Num) -> None:
        m, d, f = self.m, self.m.d_model, self.m.d_ff
        gated = m.ffn in ("swiglu", "geglu")
        experts = [(count, tokens, "")]
        if m.moe:
            e, k = m.moe.experts, m.moe.top_k
            self.gemm("router", "ffn", count, tokens, e, d, stage, kind="router", bias=False,
                      split="replicated")
            # Distinct experts a batch of `tokens` touches under uniform routing, and the
            # tokens each of them receives: E * (1 - (1 - k/E)^T) and T * k / that. With
            # expert parallelism over `ep` ranks a rank holds E / ep experts and receives
            # the tokens routed to them from all ep ranks: T * ep tokens offered, T * k rows.
            ep = self.ep
            touched = -(e / ep) * np.expm1(tokens * ep * np.log1p(-k / e))  # exact for huge e
            experts = [(count * touched, tokens * k / touched, "expert_")]
            if m.moe.shared_experts:
                experts.append((count * m.moe.shared_experts, tokens, "shared_"))
        for n_inst, rows, prefix in experts:
            names = ("gate_proj", "up_proj") if gated else ("up_proj",)
            for name in names:
                self.gemm(prefix + name, "ffn", n_inst, rows, f, d, stage)
            self.elementwise(prefix + "activation", "activation", m.ffn, n_inst, rows * f,
                             stage, inputs=2 if gated else 1, split="part")
            self.gemm(prefix + "down_proj", "ffn", n_inst, rows, d, f, stage, split="row")

    def edges(self, stage: str, count: Num, tokens: Num, head_rows: Num) -> None:
        """Embedding lookup before the layers; final norm and LM head (or pooler) after."""
        if self.counting.layers_only:
            return
        m, d = self.m, self.m.d_model
        tables = 1 + (m.position == "learned") + (m.token_types > 0)
        self.rows.append(OpRow(
            "embedding", "embedding", "embedding", count, (tables - 1) * tokens * d,
            read={"weights": tables * tokens * d * self.wb},
            written={"activations": tokens * d * self.ab}, stage=stage, dtype=self.other))
        if m.architecture == "encoder":
            self.elementwise("embed_norm", "norm", m.norm, count, tokens * d, stage,
                             weights=2 * d)
            if m.pooler:
                self.gemm("pooler", "head", count, head_rows, d, d, stage, split="replicated")
            return
        self.elementwise("final_norm", "norm", m.norm, count, head_rows * d, stage, weights=d)
        self.gemm("lm_head", "head", count, head_rows, m.vocab, d, stage, kind="lm_head",
                  bias=False, split="vocab")


def _classes(*pairs: tuple[str, Num]) -> dict[str, Num]:
    """Bytes by tensor class, summing entries of the same class."""
    out: dict[str, Num] = {}
    for cls, value in pairs:
        out[cls] = out.get(cls, 0.0) + value
    return out


def _forward(b: _Builder, stage: str, batch: Num, seq: float,
             square: float | None = None, cp: int = 1) -> None:
    """A forward pass of `batch` sequences of `seq` tokens; or, with `square`, of lengths
    L drawn from a distribution with E[L] = seq and E[L^2] = square, run without padding:
    every token-proportional quantity (GEMM rows, elementwise work, activations, K and V
    read) scales with E[L], the (query, key) pairs of attention with E[L^2] (non-causal; a
    causal sequence has (L^2 + L) / 2 of them). GEMM shapes hold the mean length. With
    context parallelism over `cp` ranks each rank holds seq / cp of every sequence's tokens
    and their queries attend over the whole sequence: 1/cp of the (query, key) pairs (the
    load-balanced causal split of Megatron's context parallelism)."""
    m = b.m
    causal = m.architecture == "decoder"
    tokens = batch * seq / cp
    head_rows = tokens if stage == "forward" else batch  # training needs every logit
    pairs = attention_pairs(seq, seq, causal) if square is None else \
        ((square + seq) / 2.0 if causal else square)
    b.edges(stage, 1, tokens, head_rows)
    b.layer(stage, m.layers, tokens, batch, seq / cp, seq, pairs / cp, seq)


def _decode(b: _Builder, batch: Num, seq_in: float, seq_out: float) -> None:
    # Token t (1..seq_out) attends to seq_in + t positions; the average is exact because
    # every quantity is linear in the context length.
    context = seq_in + (seq_out + 1) / 2.0
    b.edges("decode", seq_out, batch, batch)
    b.layer("decode", b.m.layers * seq_out, batch, batch, 1, context, context, 1)


def _serve(b: _Builder, it: Iteration) -> None:
    """One steady-state iteration of continuous batching (dse.workloads.serving): one forward
    of its prompt and decode tokens together (every weight read once per iteration); the
    attention of the B / L new prompts (causal over their own tokens) runs apart from that
    of the decode tokens (over the average context); the LM head runs on the rows that give
    an output token (the decode tokens and the last token of each finished prompt)."""
    s_in = it.seq_in
    groups = [Attention("prefill", it.new_sequences, 1.0, s_in, s_in,
                        attention_pairs(s_in, s_in, True))]
    if it.seq_out > 1:
        ctx = it.decode_context
        groups.append(Attention("decode", 1.0, it.decode_tokens, 1.0, ctx, ctx))
    b.edges("decode", 1, it.tokens, it.output_tokens)
    b.layer("decode", b.m.layers, it.tokens, it.tokens, 1.0, 0.0, 0.0, 1.0,
            attention=tuple(groups))


def _backward(rows: list[OpRow]) -> list[OpRow]:
    """Backward of each forward row: twice its FLOPs (input and weight gradients); it reads
    what the forward read plus the gradient of what it wrote, and writes the gradient of
    what it read (weight gradients in the `gradients` class)."""
    out = []
    for i, r in enumerate(rows):
        acts_read = r.read.get("activations", 0.0) + r.read.get("kv_cache", 0.0)
        split = BACKWARD_SPLITS.get(r.split, r.split)
        prev = rows[i - 1] if i else None
        if split == "column_bwd" and prev is not None and prev.split == "column" \
                and (prev.m, prev.k) == (r.m, r.k):
            split = "column_bwd_sum"  # same input as the row before: one all-reduce
        grads_in = sum(r.written.values())
        out.append(OpRow(
            f"{r.name}.backward", r.kind, r.group, r.count, 2 * r.flops,
            read={"weights": r.read.get("weights", 0.0), "activations": acts_read + grads_in},
            written={"activations": acts_read, "gradients": r.read.get("weights", 0.0)},
            m=r.m, n=r.n, k=r.k, batch=r.batch, stage="backward", dtype=r.dtype,
            wdtype=r.wdtype, split=split, layer=r.layer))
    return out


# The shapes of work (dse.phases.WORKS) a Transformer lowers, by architecture: a decoder's
# prompt pass, token generation and serving iterations; an encoder's forward; both train.
ARCHITECTURE_WORKS = {"decoder": frozenset({"prefill", "decode", "serve", "train"}),
                      "encoder": frozenset({"encode", "train"})}
WORKS = ARCHITECTURE_WORKS["decoder"] | ARCHITECTURE_WORKS["encoder"]


def works_of(model: TransformerSpec) -> frozenset[str]:
    """The shapes of work this model runs: its architecture's."""
    return ARCHITECTURE_WORKS[model.architecture]

# The backward of a tensor-parallel GEMM: a column-parallel (or vocabulary-parallel) GEMM's
# input gradient is a partial sum over the ranks and is all-reduced (Megatron's `f`); a
# row-parallel GEMM's is already split and needs none (Shoeybi et al. 2019, Fig. 3).
BACKWARD_SPLITS = {"column": "column_bwd", "vocab": "column_bwd", "row": "row_bwd"}


def lower(model: TransformerSpec, scenario: Scenario, counting: Counting = DEFAULT,
          batch: Num | None = None, chips: int = 1) -> OpTable:
    """The operator table of `model` run as `scenario`, or with `batch` ([N] sequences, one
    per design) in place of the scenario's batch: every quantity is then [N, I]. `batch:
    max` and `best` depend on the hardware and are resolved by the performance model.
    `chips` (data-parallel replicas) does not change one replica's table (parallel splits
    are dse.model.parallel's), except in training, where the global batch is shared among
    them: the rows are one micro-batch's, counted for every micro-batch of the step, and
    the optimizer's update follows (dse.workloads.training)."""
    setup = training.setup(scenario, chips) if phases.get(scenario.phase).trains else None
    if setup is not None and batch is None:
        batch = float(setup.micro_batch)
    if batch is None:
        if not isinstance(scenario.batch, int):
            raise ValueError(f"batch '{scenario.batch}' depends on the hardware; give a "
                             "number to lower")
        batch = float(scenario.batch)
    else:
        batch = np.asarray(batch, dtype=float)
    s_in, s_out = float(scenario.seq_in), float(scenario.seq_out)
    square = None  # E[L^2] of the scenario's length distribution (inference), if any
    if scenario.lengths is not None:  # tokens per sequence are then E[L], seq_in the longest
        s_in, square = scenario.lengths.moments()
    b = _Builder(model, scenario, counting)
    phase = scenario.phase
    work = phases.get(phase).work
    decoder = model.architecture == "decoder"
    if work not in ARCHITECTURE_WORKS[model.architecture]:
        other = "encoder" if decoder else "decoder"
        own = ARCHITECTURE_WORKS[model.architecture] - {"train"}
        uses = phases.listed(phases.those(lambda p: p.work in own), "or")
        article = "an" if model.architecture == "encoder" else "a"
        raise ValueError(f"phase {phase} is for {other}s; use {uses} for {article} "
                         f"{model.architecture}" if work in ARCHITECTURE_WORKS[other] else
                         f"phase {phase} is not run by a Transformer; use {uses}")
    engine = engine_of(scenario)
    it = iteration(batch, s_in, s_out, engine) if work == "serve" else None
    if work == "prefill":
        _forward(b, "prefill", batch, s_in)
    if work == "decode":
        _decode(b, batch, s_in, s_out)
    if it is not None:
        _serve(b, it)
    if work == "encode":
        _forward(b, "inference", batch, s_in, square)
    if setup is not None:
        b.ep = setup.ep
        _forward(b, "forward", batch, s_in, cp=setup.cp)
        forward = list(b.rows)
        b.rows += training.recompute_rows(forward, setup.recompute)
        b.rows += _backward(forward)
        for r in b.rows:
            r.count *= setup.microbatches
        b.rows.append(training.optimizer_row(model, setup, parameter_counts(model)["total"],
                                             chips))
    cached = decoder
    generates = phases.get(phase).generates
    kv_per_token = model.layers * 2 * model.n_kv_heads * model.d_head * b.kvb if cached \
        else 0.0
    context_max = s_in + (s_out if generates else 0.0)
    context_avg = s_in + ((s_out + 1) / 2.0 if generates else 0.0)
    # Serve: each sequence in flight holds the KV its admission policy counts, in a cache
    # that gets kv_memory_fraction of the memory beside the weights and workspace: the bytes
    # it takes are the reservations over that fraction (dse.workloads.serving).
    kv_tokens_held = kv_tokens(s_in, s_out, engine) / engine.kv_memory_fraction \
        if it is not None else context_max
    facts = Facts(
        phase=phase, batch=batch, seq_in=s_in, seq_out=s_out if generates else 0.0,
        layers=model.layers, kv_heads=model.n_kv_heads,
        resident={"weights": parameter_counts(model)["total"] * b.wb,
                  "kv_cache": batch * kv_tokens_held * kv_per_token},
        hidden_bytes_per_token=model.d_model * b.ab,
        context_max=context_max, context_avg=context_avg,
        iteration_tokens=it.tokens if it is not None else 0.0,
    )
    return OpTable.from_rows(b.rows, facts)


def context(model: TransformerSpec) -> int | None:
    """Longest sequence the model supports (max_positions), if given."""
    return model.max_positions


def check(model: TransformerSpec, sc: Scenario, tp: int, pp: int
          ) -> tuple[list[DseError], list[str]]:
    """(errors, warnings) of running `sc` with tensor parallelism `tp` (it splits the
    attention heads) and `pp` pipeline stages (they split the layers)."""
    errors: list[DseError] = []
    warnings: list[str] = []
    if model.heads % tp:  # structured: each route names tp its own way (--tp on the CLI)
        errors.append(DseError(f"{tp}: tensor parallelism splits the {model.heads} attention "
                               f"heads of {model.name}; expected a divisor of {model.heads}",
                               field="tp", domain="execution", value=tp,
                               rule=f"a divisor of {model.heads}", inline=True))
    if pp > model.layers:
        errors.append(DseError(f"{pp}: pipeline parallelism splits the {model.layers} layers "
                               f"of {model.name}; expected at most {model.layers} stages",
                               field="pp", domain="execution", value=pp,
                               rule=f"at most {model.layers}", inline=True))
    elif model.layers % pp:
        warnings.append(f"--pp {pp} does not divide the {model.layers} layers of "
                        f"{model.name}: the longest stage holds {-(-model.layers // pp)} "
                        "layers and sets the pace")
    length = sc.seq_in + (sc.seq_out if phases.get(sc.phase).generates else 0)
    if model.max_positions and length > model.max_positions:
        warnings.append(f"{model.name}: {length} tokens (seq_in + seq_out) exceed the "
                        f"model's context of {model.max_positions} (max_positions)")
    return errors, warnings
