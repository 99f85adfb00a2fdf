"""The metrics an evaluation reports, defined once: key (the JSON key and CSV column, with
its unit as a suffix), table label, unit, scope and meaning. `dse eval`'s tables, JSON and
CSV, the study's columns and the docs' metrics reference (docs/reference/metrics.md,
generated from it) all follow this registry.

Words used throughout:
- **system**: every chip of the execution (`chips`); a system quantity is summed or taken
  over all of them. A quantity of one chip has `_per_chip` in its key and "per chip" in
  its label; a key without it is the system's (or per request, where the scope says so).
- **request**: one sequence: seq_in prompt tokens in, seq_out tokens out (decode, serve);
  its prompt in, its first token out (prefill); a sample (inference).
- **step**: one run of the scenario's unit of work on the whole system: a GEMM; the batch's
  prompts (prefill); the batch generating seq_out tokens each, in lockstep (decode); one
  steady-state iteration of the serving engine, a forward carrying every decode token and
  the new prompts' chunks plus the host's overhead (serve); a forward of the batch
  (inference); an optimizer step of the global batch (training).
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse import units

SYSTEM, PER_CHIP, PER_REQUEST, PER_STEP = "system", "per chip", "per request", "per step"
EACH_CHIP = "each chip"  # a ratio or clock the same on every chip: no per_chip in its key


@dataclass(frozen=True)
class Metric:
    """One reported quantity."""

    key: str  # JSON key and CSV column (unit-suffixed)
    label: str  # how tables name it
    unit: units.Kind | str  # a Kind (formatted with prefixes) or a unit word
    scope: str  # SYSTEM, PER_CHIP, EACH_CHIP, PER_REQUEST or PER_STEP
    meaning: str  # one sentence, in the docs' metrics reference


_ALL = (
    Metric("step_time_s", "step time", units.TIME, PER_STEP,
           "time of one step on the whole system (see 'step')"),
    Metric("latency_s", "latency per request", units.TIME, PER_REQUEST,
           "a request's start to its last output: the step for gemm, prefill, decode (the "
           "batch generates in lockstep), inference and training; TTFT + (seq_out - 1) x "
           "TPOT for serve"),
    Metric("ttft_s", "time to first token (TTFT)", units.TIME, PER_REQUEST,
           "a request's start to its first output token: the step (prefill); the "
           "iterations that carry its prompt (serve; no queueing: the engine is in steady "
           "state and admits a request as one finishes)"),
    Metric("tpot_s", "time per output token (TPOT)", units.TIME, PER_REQUEST,
           "time between a request's consecutive output tokens: step / seq_out (decode); "
           "one iteration (serve)"),
    Metric("decode_tokens_per_s", "decode rate per sequence", "tokens/s", PER_REQUEST,
           "output tokens per second of one request: 1 / TPOT (decode, serve)"),
    Metric("output_tokens_per_s", "output tokens per second (system)", "tokens/s", SYSTEM,
           "output tokens per second of all requests on all chips (decode, serve)"),
    Metric("tokens_per_s", "tokens per second (system)", "tokens/s", SYSTEM,
           "training tokens per second on all chips"),
    Metric("samples_per_s", "samples per second (system)", "samples/s", SYSTEM,
           "samples (sequences, or user-item pairs for a recommender) per second on all "
           "chips (inference, training)"),
    Metric("achieved_flop_per_s", "achieved FLOP/s (system)", units.FLOP_RATE, SYSTEM,
           "FLOPs the step computes / its time, all chips"),
    Metric("tokens_per_s_per_chip", "tokens per second per chip", "tokens/s", PER_CHIP,
           "the system's tokens per second (prompt tokens for prefill, output tokens for "
           "decode and serve, sequence tokens for inference and training) / chips"),
    Metric("model_flop_per_s_per_chip", "model FLOP/s per chip", units.FLOP_RATE, PER_CHIP,
           "the model's FLOPs (no recomputation) per second of one chip (training)"),
    Metric("hardware_flop_per_s_per_chip", "hardware FLOP/s per chip (with recomputation)",
           units.FLOP_RATE, PER_CHIP,
           "FLOPs one chip computes per second, recomputation included (training)"),
    Metric("mfu", "model FLOPs utilization (MFU)", "fraction", EACH_CHIP,
           "model FLOP/s per chip / the chip's peak at the linear layers' precision"),
    Metric("power_per_chip_w", "power per chip", units.POWER, PER_CHIP,
           "average power of one chip over the step (at most its TDP)"),
    Metric("clock_hz", "core clock (each chip)", units.FREQUENCY, EACH_CHIP,
           "the core clock each chip runs at (lowered when its TDP limits it)"),
    Metric("energy_per_step_j", "energy per step (system)", units.ENERGY, SYSTEM,
           "energy of one step on all chips: power per chip x chips x step time"),
    Metric("energy_per_token_j", "energy per token (system)", units.ENERGY, SYSTEM,
           "energy of all chips per output token (decode, serve) or prompt token (prefill)"),
    Metric("energy_per_sample_j", "energy per sample (system)", units.ENERGY, SYSTEM,
           "energy of all chips per sample (inference)"),
    Metric("area_per_chip_mm2", "die area per chip (modelled)", "mm2", PER_CHIP,
           "modelled silicon area of one chip, all its dies"),
    Metric("cost_per_chip_usd", "cost to make per chip (modelled)", units.COST, PER_CHIP,
           "modelled cost to make one chip: good dies, memory, package, assembly loss and "
           "test (see Cost)"),
    Metric("cost_usd", "cost to make (system)", units.COST, SYSTEM,
           "cost to make all chips: cost per chip x chips"),
)
METRICS: dict[str, Metric] = {m.key: m for m in _ALL}

