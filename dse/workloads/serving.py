"""Continuous batching in steady state: what one iteration of a serving engine carries.

Production engines (TensorRT-LLM in-flight batching, vLLM, SGLang) run one fused forward per
iteration: a token for every sequence in generation plus prompt tokens of newly admitted
requests, every weight read once. With `batch` = B sequences in flight, each holding a
prompt of s_in tokens and producing s_out output tokens, a sequence stays L = k + s_out - 1
iterations: k iterations that carry its prompt (the last of them gives its first token),
then s_out - 1 generation steps. In steady state B / L sequences finish and as many start
per iteration, so one iteration carries

    prompt tokens  P = B s_in / L
    decode tokens  D = B (s_out - 1) / L      (each over the average context s_in + s_out/2)
    output tokens      B s_out / L            (= B when k = 1)

k = ceil(s_in / chunk), chunk = the token budget of an iteration left after the decode tokens
(max_tokens_per_iteration - D); without a budget the prompt goes in one iteration (k = 1).
TensorRT-LLM's trtllm-bench sizes its max_num_tokens with the same steady state: max batch x
(1 + input / output length) (tensorrt_llm/bench/build/tuning.py).

KV admission: a request reserves KV for ceil((s_in + s_out) / block) blocks (reserve_max,
TensorRT-LLM's GUARANTEED_NO_EVICT), or holds its current context (average: the average over
the generation, s_in + (s_out + 1) / 2, plus half a block of the last, partly filled block).
The KV cache gets kv_memory_fraction of the memory left beside the weights and workspace.
No I/O; arrays over designs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.spec import stack_library
from dse.spec.workload import Engine, Scenario

DEFAULT_ENGINE = Engine()


def engine_of(sc: Scenario) -> Engine:
    """The engine profile: the scenario's stack's (dse.spec.stack; the documented default
    without one), with the fields the scenario's `engine:` sets replaced."""
    base = stack_library.find(sc.stack).engine if sc.stack is not None else DEFAULT_ENGINE
    if sc.engine is None:
        return base
    if base == DEFAULT_ENGINE:
        return sc.engine
    return base.model_copy(update={k: getattr(sc.engine, k)
                                   for k in sc.engine.model_fields_set})


def front_end_of(sc: Scenario) -> float:
    """s the scenario's stack adds to every served request's first token (its serving
    front-end: request path and first sampling step); 0 without a stack."""
    return stack_library.find(sc.stack).front_end.total if sc.stack is not None else 0.0


@dataclass(frozen=True)
class Iteration:
    """One steady-state iteration with `batch` sequences in flight (arrays over designs)."""

    batch: np.ndarray | float
    prefill_iterations: np.ndarray | float  # k: iterations that carry one prompt
    lifetime: np.ndarray | float  # L = k + s_out - 1 iterations a sequence stays
    prompt_tokens: np.ndarray | float  # P = B s_in / L
    decode_tokens: np.ndarray | float  # D = B (s_out - 1) / L
    decode_context: float  # keys a decode token attends to, on average: s_in + s_out / 2
    seq_in: float
    seq_out: float
    overhead: float  # s of host time per iteration the GPU waits for

    @property
    def new_sequences(self) -> np.ndarray | float:
        """Sequences that start (and finish) per iteration: B / L."""
        return self.batch / self.lifetime

    @property
    def tokens(self) -> np.ndarray | float:
        """Tokens the iteration's forward carries: P + D."""
        return self.prompt_tokens + self.decode_tokens

    @property
    def output_tokens(self) -> np.ndarray | float:
        """Tokens generated per iteration: B s_out / L."""
        return self.batch * self.seq_out / self.lifetime


def iteration(batch: np.ndarray | float, seq_in: float, seq_out: float,
              engine: Engine) -> Iteration:
    """The steady-state iteration of `batch` sequences in flight (see the module text)."""
    b = np.asarray(batch, dtype=float) if np.ndim(batch) else float(batch)
    s_in, s_out = float(seq_in), float(seq_out)
    budget = engine.max_tokens_per_iteration
    if budget is None:
        k = 1.0 if np.ndim(b) == 0 else np.ones_like(b)
    else:
        left = np.maximum(budget - b * (s_out - 1.0) / s_out, 1.0)  # after decode tokens
        k = np.ceil(s_in / np.minimum(left, s_in))
    life = k + s_out - 1.0
    return Iteration(batch=b, prefill_iterations=k, lifetime=life,
                     prompt_tokens=b * s_in / life, decode_tokens=b * (s_out - 1.0) / life,
                     decode_context=s_in + s_out / 2.0, seq_in=s_in, seq_out=s_out,
                     overhead=float(engine.iteration_overhead))


def kv_tokens(seq_in: float, seq_out: float, engine: Engine) -> float:
    """KV tokens one sequence in flight holds, as the admission policy counts them."""
    block = engine.kv_block_tokens
    if engine.admission == "reserve_max":
        return math.ceil((seq_in + seq_out) / block) * block
    return seq_in + (seq_out + 1) / 2.0 + (block - 1) / 2.0


def batch_limit(seq_in: float, seq_out: float, engine: Engine) -> float:
    """Most sequences in flight the engine's limits allow (inf without limits): max_batch,
    and the token budget, which must carry the steady state's P + D tokens per iteration
    (B (s_in + s_out - 1) / L <= budget, with a prompt chunked over at least
    ceil(s_in / budget) iterations)."""
    most = float(engine.max_batch) if engine.max_batch is not None else math.inf
    budget = engine.max_tokens_per_iteration
    if budget is not None:
        life = math.ceil(seq_in / budget) + seq_out - 1
        most = min(most, math.floor(budget * life / (seq_in + seq_out - 1)))
    return most


def describe_engine(engine: Engine | None) -> str:
    """One line: the engine profile, `(default)` when the scenario gives none."""
    e = engine or DEFAULT_ENGINE
    admit = {"reserve_max": "reserves prompt + max output",
             "average": "holds the average context"}[e.admission]
    limits = [f"max batch {e.max_batch}" if e.max_batch is not None else "",
              f"{e.max_tokens_per_iteration} tokens/iteration"
              if e.max_tokens_per_iteration is not None else ""]
    text = (f"engine{' (default)' if engine is None else ''}: "
            f"{e.iteration_overhead * 1e3:.3g} ms host overhead per iteration, KV "
            f"{e.kv_memory_fraction:.0%} of free memory in {e.kv_block_tokens}-token blocks, "
            f"each request {admit}")
    limits = [x for x in limits if x]
    return text + (", " + ", ".join(limits) if limits else "")
