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

import numpy as np

from dse import phases
from dse.errors import DseError
from dse.spec.workload import Scenario, TransformerSpec, parameter_counts
from dse.workloads import training
from dse.workloads.common import DEFAULT, PRECISIONS, Counting, attention_pairs
from dse.workloads.optable import Facts, Num, OpRow, OpTable
from dse.workloads.serving import Iteration, engine_of, iteration, kv_tokens
from dse.workloads.transformer_rows import Attention, Builder


def _forward(b: Builder, stage: str, batch: Num, seq: float,
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


def _decode(b: Builder, batch: Num, seq_in: float, seq_out: float) -> None:
    # Token t (1..seq_out) attends to seq_in + t positions; the average is exact because
    # every quantity is linear in the context length.
    context = seq_in + (seq_out + 1) / 2.0
    b.edges("decode", seq_out, batch, batch)
    b.layer("decode", b.m.layers * seq_out, batch, batch, 1, context, context, 1)


def _serve(b: Builder, it: Iteration) -> None:
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
    b = Builder(model, scenario, counting)
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
    if sc.sparsity is not None and PRECISIONS[sc.precision][0] == "fp32":
        errors.append(DseError(f"{sc.sparsity}: 2:4 sparse matrix units take 16-, 8- and 4-bit "
                               "weights (fp32 runs 1:2); expected another precision",
                               field="sparsity", value=sc.sparsity,
                               rule="16-, 8- or 4-bit weights"))
    length = sc.seq_in + (sc.seq_out if phases.get(sc.phase).generates else 0)
    if model.max_positions and length > model.max_positions:
        warnings.append(f"{model.name}: {length} tokens (seq_in + seq_out) exceed the "
                        f"model's context of {model.max_positions} (max_positions)")
    return errors, warnings
