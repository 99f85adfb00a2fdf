"""What `dse memory` prints: the training memory of one setup per chip (by part and by
memory level), whether it fits, the setup that ran, and the strategies that fit ranked by
step time. Pure data first (`memory_document`, `json_text`), then rich tables."""

from __future__ import annotations

from typing import Any

from dse import units

PART_LABELS = {"parameters": "parameters", "gradients": "gradients",
               "optimizer_state": "optimizer state", "activations": "activations",
               "temporary": "temporary buffers"}


def memory_document(breakdown: dict[str, Any], notes: list[str],
                    suggested: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON document: `fits`, `per_chip_bytes`, `placement`, `suggestions` first, then
    the rest of the breakdown (dse.model.memory_plan.breakdown) and, with --suggest, how the
    suggestions were found (`suggest_summary`)."""
    doc = {"fits": breakdown["fits"], "per_chip_bytes": breakdown["per_chip_bytes"],
           "placement": breakdown["placement"],
           "suggestions": suggested["suggestions"] if suggested else []}
    doc.update({k: v for k, v in breakdown.items() if k not in doc})
    doc["notes"] = list(notes)
    if suggested is not None:
        doc["suggest_summary"] = suggested["summary"]
    return doc


def json_text(doc: dict[str, Any]) -> str:
    """Strict JSON through the one writer (dse.report.jsonout: NaN and infinities as null)."""
    from dse.report import jsonout

    return jsonout.dumps(doc)


def _bytes(value: float | None) -> str:
    """An amount held, in decimal units (capacities keep their binary ones: `_capacity`)."""
    return "-" if value is None else units.format_quantity(float(value), units.TRAFFIC)


def _capacity(value: float) -> str:
    return units.format_quantity(float(value), units.BYTES)


def _time(value: float | None) -> str:
    return "-" if value is None else units.format_quantity(float(value), units.TIME)


def heading(doc: dict[str, Any]) -> str:
    """What ran: `llama2-70b [training (default): global batch 64 x 2048 tokens, bf16] on
    h100-sxm, 64 chips (tp 1, pp 1, dp 64)`."""
    sc, st = doc["scenario"], doc["setup"]
    batch = sc["global_batch"]
    if st is None:  # a recommender: samples, data-parallel chips
        what = f"training, global batch {batch} samples, {sc['precision']}"
        n = doc["chips"]
        chips = f", {n} chip{'s' if n > 1 else ''}"
    else:
        what = (f"training, global batch {batch} sequences x {sc['seq_in']} tokens "
                f"({batch * sc['seq_in']:,} tokens per step), {sc['precision']}")
        chips = (f", {st['chips']} chip{'s' if st['chips'] > 1 else ''} "
                 f"(tp {st['tp']}, pp {st['pp']}{_cp(st)}, dp {st['dp']})")
    return f"{doc['workload']} [{sc['name']}: {what}] on {doc['hardware']}{chips}"


def _cp(st: dict[str, Any]) -> str:
    """", cp C" and ", ep E" where the setup shares each sequence over C ranks and each MoE
    layer's experts over E, else nothing."""
    return "".join(f", {k} {st[k]}" for k in ("cp", "ep") if st.get(k, 1) > 1)


def fit_text(doc: dict[str, Any]) -> str:
    """yes / yes, with offload ... / no: reason."""
    if not doc["fits"]:
        return f"no: {doc['reason']}"
    beyond = doc["beyond_fast_bytes"]
    if not beyond:
        return f"yes, in {' + '.join(doc['fast_levels'])}" if doc["fast_levels"] else "yes"
    where = ", ".join(f"{_bytes(b)} in {lv}" for lv, b in beyond.items())
    setup = doc["setup"] or {}
    off = setup.get("offload")
    how = (f"optimizer state{' and parameters' if off['parameters'] else ''} offloaded to "
           f"{off['to']}" if off else "placement spills what "
           f"{' + '.join(doc['fast_levels'])} cannot hold")
    return f"yes, with offload: {where} ({how})"


def memory_tables(doc: dict[str, Any], top: int = 20) -> Any:
    """Heading, fit, bytes per chip by part, placement per level, setup and step, and the
    ranked suggestions (with --suggest)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = [Text(heading(doc), style="bold")]
    out += [Text(f"note: {n}", style="dim") for n in doc["notes"]]
    out.append(Text(f"fits: {fit_text(doc)}", style="bold green" if doc["fits"] else "bold red"))

    per = doc["per_chip_bytes"]
    total = per["total"] or 0.0
    parts = Table(title="Memory per chip" + (" (busiest pipeline stage)" if doc["setup"]
                                             else ""), title_justify="left")
    for col in ("part", "bytes", "share"):
        parts.add_column(col, justify="left" if col == "part" else "right")
    if doc["setup"] is not None:
        for key, label in PART_LABELS.items():
            parts.add_row(label, _bytes(per[key]),
                          f"{per[key] / total:.1%}" if total else "-")
    parts.add_row("total on chip", _bytes(total), "100%" if total else "-", style="bold")
    if doc["offloaded_bytes"]:
        parts.add_row("offloaded (explicit)", _bytes(doc["offloaded_bytes"]), "")

    place = Table(title="Placement per level", title_justify="left")
    for col in ("level", "used", "capacity", "share", "tier"):
        place.add_column(col, justify="left" if col in ("level", "tier") else "right")
    fast = set(doc["fast_levels"])
    for level, used in doc["placement"].items():
        cap = doc["capacity"][level]
        tier = "fast" if level in fast else ("slower" if level in doc["capacity"]
                                             and used else "")
        place.add_row(level, _bytes(used), _capacity(cap), f"{used / cap:.1%}" if cap else "-",
                      tier)
    out += [parts, place]
    if doc["setup"] is not None:
        out.append(_setup_table(doc))
    if "suggest_summary" in doc:
        out += _suggestions(doc, top)
    return Group(*out)


def _setup_table(doc: dict[str, Any]) -> Any:
    from rich.table import Table

    st = doc["setup"]
    chosen = set(st["chosen"])

    def mark(key: str, text: str) -> str:
        return f"{text} (chosen)" if key in chosen else text

    t = Table(title="Setup (chosen: the step model's fastest that fits)",
              title_justify="left", show_header=False)
    t.add_column("field")
    t.add_column("value", justify="right")
    if st.get("cp", 1) > 1:
        t.add_row("tensor / pipeline / context / data parallel",
                  f"{st['tp']} / {st['pp']} / {st['cp']} / {st['dp']}")
    else:
        t.add_row("tensor / pipeline / data parallel", f"{st['tp']} / {st['pp']} / {st['dp']}")
    t.add_row("micro-batch", mark("micro_batch", f"{st['micro_batch']} sequence"
                                 + ("s" if st["micro_batch"] > 1 else "")))
    t.add_row("micro-batches per step", f"{st['microbatches']:g}")
    t.add_row("ZeRO stage", mark("zero", str(st["zero"])))
    t.add_row("recomputation", mark("recompute", st["recompute"]))
    t.add_row("sequence parallelism", mark("sequence_parallel",
                                           "on" if st["sequence_parallel"] else "off"))
    t.add_row("optimizer", st["optimizer"])
    sched = st["schedule"] + (f" ({st['virtual_stages']} virtual stages)"
                              if st["virtual_stages"] > 1 else "")
    t.add_row("pipeline schedule", mark("schedule", sched))
    off = st["offload"]
    t.add_row("offload", "-" if off is None else
              f"optimizer state {off['optimizer']:.0%}, parameters {off['parameters']:.0%} "
              f"to {off['to']}")
    if doc["step_time_s"] is not None:
        t.add_row("step time", _time(doc["step_time_s"]))
        t.add_row("tokens per second (system)", f"{doc['tokens_per_s']:,.0f}")
        t.add_row("MFU", f"{doc['mfu']:.1%}" if doc["mfu"] is not None else "-")
    return t


def offload_cell(row: dict[str, Any]) -> str:
    """Bytes beyond the fast tier and where: `LPDDR5X 156.2 GB` (offloaded), `spill 67.9 GB
    to LPDDR5X` (placed there because the fast tier is full), or `-`."""
    beyond = row["beyond_fast_bytes"]
    if not beyond:
        return "-"
    where = ", ".join(f"{lv} {_bytes(b)}" for lv, b in beyond.items())
    return where if row["offload"] else f"{where} (spill)"


def _sp(row: dict[str, Any]) -> str:
    """Sequence parallelism: on, off, or - (no tensor parallelism to go with)."""
    if row["tp"] == 1:
        return "-"
    return "on" if row["sequence_parallel"] else "off"


def _suggestions(doc: dict[str, Any], top: int) -> list[Any]:
    from rich.table import Table
    from rich.text import Text

    rows, summ = doc["suggestions"], doc["suggest_summary"]
    if not rows:
        least = summ.get("least_memory")
        text = f"no strategy fits on {doc['setup']['chips']} chips"
        if least:
            text += (f": the least memory is {_bytes(least['bytes_per_chip'])} per chip "
                     f"(tp {least['tp']}, pp {least['pp']}{_cp(least)}, dp {least['dp']}, "
                     f"micro-batch "
                     f"{least['micro_batch']}, ZeRO {least['zero']}, recompute "
                     f"{least['recompute']}, offload {least['offload'] or '-'}) against "
                     f"{_capacity(least['room_bytes'])} of room")
        return [Text(text, style="bold red"), *_failed(summ)]
    shown = rows[:top]
    t = Table(title=f"Strategies that fit, by step time (top {len(shown)} of {len(rows)})",
              title_justify="left")
    experts = any(r.get("ep", 1) > 1 for r in shown)  # a mixture of experts: ep shown
    for col in ("rank", "tp", "pp", "cp", *(("ep",) if experts else ()), "dp",
                "micro-\nbatch", "ZeRO", "recompute", "SP", "offload", "memory\nper chip",
                "step time", "tokens/s", "MFU"):
        t.add_column(col, justify="left" if col in ("recompute", "offload") else "right",
                     no_wrap=True)
    for r in shown:
        pp = str(r["pp"]) + (f" (v{r['virtual_stages']})" if r["virtual_stages"] > 1 else "")
        t.add_row(str(r["rank"]), str(r["tp"]), pp, str(r["cp"]),
                  *((str(r["ep"]),) if experts else ()), str(r["dp"]),
                  f"{r['micro_batch']} x {r['microbatches']:g}", str(r["zero"]),
                  r["recompute"], _sp(r), offload_cell(r),
                  _bytes(r["memory_per_chip_bytes"]), _time(r["step_time_s"]),
                  "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:,.0f}",
                  "-" if r["mfu"] is None else f"{r['mfu']:.1%}")
    foot = (f"{summ['enumerated']:,} strategies enumerated, {summ['fit']:,} fit the memory "
            f"planner, {summ['evaluated']} evaluated (per tp, pp, cp, offload and micro-batch "
            f"the first in the step model's order, least recomputation, ZeRO 1, 2, 0, 3, SP "
            f"on, that fits the fast tier, and each wider set of tiers; at most "
            f"{summ['max_evaluated']}), {summ['feasible']} feasible. tp <= "
            f"{summ['tp_max']} (one node), pp divides the layers, cp the sequence (at most "
            f"{summ.get('cp_max', 1)}), dp the global batch. "
            "micro-batch: sequences x micro-batches per step; pp (vN): the interleaved "
            "schedule with N model chunks per rank, chosen by the step model; recompute none "
            "runs fused "
            "attention (scores recomputed, as selective).")
    return [t, Text(foot, style="dim"), *_failed(summ)]


def _failed(summ: dict[str, Any]) -> list[Any]:
    from rich.text import Text

    return [Text(f"not timed: tp {f['tp']}, pp {f['pp']}, micro-batch {f['micro_batch']}: "
                 f"{f['error']}", style="dim") for f in summ.get("failed", [])]
