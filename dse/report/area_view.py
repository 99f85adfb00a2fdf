"""What `dse area` prints and draws: the breakdown of a die by component, its die-edge
budget and the error against the published area."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dse.model.area import AreaResult
from dse.model.cost import CostResult


def area_document(res: AreaResult, i: int = 0) -> dict[str, Any]:
    """JSON for design i: total_mm2, components, published_mm2, rel_error, edge, feasible."""
    rel = res.rel_error
    return {
        "hardware": res.hardware,
        "node": res.node,
        "total_mm2": float(res.total_mm2[i]),
        "components": {k: float(v[i]) for k, v in res.components.items()},
        "published_mm2": res.published_mm2,
        "rel_error": None if rel is None else float(rel[i]),
        "edge_needed_mm": float(res.edge_needed_mm[i]),
        "perimeter_mm": float(res.perimeter_mm[i]),
        "feasible": bool(res.feasible[i]),
        "reason": str(res.reason[i]) or None,
        "package": _package(res, i),
    }


def _package(res: AreaResult, i: int) -> dict[str, Any] | None:
    """The package geometry of design i (dse.model.package), None without the node's rules."""
    g = res.geometry
    if g is None:
        return None
    return {
        "die_long_mm": float(g.long_mm[i]), "die_short_mm": float(g.short_mm[i]),
        "hbm_edges_per_die": float(g.hbm_edges[i]),
        "hbm_stacks_per_edge_needed": float(g.per_edge_needed[i]),
        "hbm_stacks_per_long_edge": float(g.per_long_edge[i]),
        "hbm_stacks_per_short_edge": float(g.per_short_edge[i]),
        "die_to_die_joints": float(g.d2d_joints[i]),
        "interposer_mm2": float(g.interposer_mm2[i]),
        "interposer_limit_mm2": float(g.interposer_limit_mm2[i]),
        "packaging": str(g.packaging[i]),
        "feasible": bool(g.feasible[i]),
        "reason": str(g.reason[i]) or None,
    }


def cost_document(res: CostResult, i: int = 0) -> dict[str, Any]:
    """JSON for design i: total_usd per chip, components (USD, summing to it), and the
    quantities they follow from (dies per wafer, yield, good die, package)."""
    return {
        "total_usd": float(res.total_usd[i]),
        "components": {k: float(v[i]) for k, v in res.components.items()},
        "wafer_usd": res.wafer_usd,
        "die_mm2": float(res.die_mm2[i]),
        "dies": int(res.dies[i]),
        "dies_per_wafer": int(res.dies_per_wafer[i]),
        "die_yield": float(res.die_yield[i]),
        "good_die_usd": float(res.good_die_usd[i]),
        "package": str(res.package[i]),
        "interposer_mm2": float(res.interposer_mm2[i]),
        "assembly_yield": float(res.assembly_yield[i]),
        "feasible": bool(res.feasible[i]),
        "reason": str(res.reason[i]) or None,
        "memory": {k: {"capacity_bytes": float(cap[i]), "usd_per_byte": float(p[i])}
                   for k, (cap, p) in res.memory.items()},
    }


def _cost_table(doc: dict[str, Any]) -> Any:
    from rich.table import Table

    c = doc["cost"]
    t = Table(title=f"{doc['hardware']}: cost to make ({doc['node']})", title_justify="left")
    t.add_column("component")
    t.add_column("USD", justify="right")
    t.add_column("share", justify="right")
    t.add_column("from")
    total = c["total_usd"]
    why = {"dies": f"{c['dies']} x {c['good_die_usd']:,.0f} USD a good die: "
                   f"{c['wafer_usd']:,.0f} USD a wafer / ({c['dies_per_wafer']} dies x "
                   f"{c['die_yield']:.1%} yield) of {c['die_mm2']:,.0f} mm2",
           "package": f"{c['package']}, {c['interposer_mm2']:,.0f} mm2",
           "assembly loss": f"{c['assembly_yield']:.1%} assembly yield",
           **{k: f"{m['capacity_bytes'] / 1e9:,.1f} GB x {m['usd_per_byte'] * 1e9:.3g} USD/GB"
              for k, m in c["memory"].items()}}
    for name, usd in c["components"].items():
        t.add_row(name, f"{usd:,.0f}", f"{usd / total:.1%}", why.get(name, ""))
    t.add_row("total per chip", f"{total:,.0f}", "100%", "", end_section=True)
    if not c["feasible"]:
        t.add_row("infeasible", c["reason"], "", "")
    return t


def area_tables(docs: list[dict[str, Any]]) -> Any:
    """One table per chip: component, mm^2, share; then total, published and error."""
    from rich.console import Group
    from rich.table import Table

    out = []
    for doc in docs:
        t = Table(title=f"{doc['hardware']} ({doc['node']})", title_justify="left")
        t.add_column("component")
        t.add_column("mm2", justify="right")
        t.add_column("share", justify="right")
        total = doc["total_mm2"]
        for name, mm2 in doc["components"].items():
            t.add_row(name, f"{mm2:,.1f}", f"{mm2 / total:.1%}")
        t.add_row("total", f"{total:,.1f}", "100%", end_section=True)
        if doc["published_mm2"] is not None:
            t.add_row("published", f"{doc['published_mm2']:,.0f}", "")
            t.add_row("error", f"{doc['rel_error']:+.1%}", "")
        t.add_row("die edge needed / available",
                  f"{doc['edge_needed_mm']:.0f} / {doc['perimeter_mm']:.0f} mm", "")
        pk = doc.get("package")
        if pk is not None:
            t.add_row("die (long x short)",
                      f"{pk['die_long_mm']:.1f} x {pk['die_short_mm']:.1f} mm", "")
            if pk["hbm_stacks_per_edge_needed"] > 0:
                t.add_row("HBM stacks per edge needed / held",
                          f"{pk['hbm_stacks_per_edge_needed']:.0f} / "
                          f"{pk['hbm_stacks_per_long_edge']:.0f} (long), "
                          f"{pk['hbm_stacks_per_short_edge']:.0f} (short)",
                          f"{pk['hbm_edges_per_die']:.0f} edges")
            if pk["die_to_die_joints"] > 0:
                t.add_row("die-to-die joints", f"{pk['die_to_die_joints']:.0f}", "")
            t.add_row(f"interposer / limit ({pk['packaging']})",
                      f"{pk['interposer_mm2']:,.0f} / {pk['interposer_limit_mm2']:,.0f} mm2",
                      "")
        if not doc["feasible"]:
            t.add_row("infeasible", doc["reason"], "")
        elif pk is not None and not pk["feasible"]:
            t.add_row("package infeasible", pk["reason"], "")
        out.append(t)
        if doc.get("cost") is not None:
            out.append(_cost_table(doc))
    return Group(*out)


CATEGORIES = ("compute", "unit control", "vector units", "SRAM", "cache", "DRAM PHY",
              "chip-to-chip PHY", "host PHY", "die-to-die PHY", "uncore", "edge padding")


def _categories(components: dict[str, float]) -> dict[str, float]:
    """Components summed into the fixed categories the plot stacks in one order."""
    out: dict[str, float] = {}
    for name, mm2 in components.items():
        if name.endswith(("(sram)", "(register)")):
            cat = "SRAM"
        elif name.endswith("(cache)"):
            cat = "cache"
        elif name.endswith(" PHY") and name not in CATEGORIES:
            cat = "DRAM PHY"
        else:
            cat = name
        out[cat] = out.get(cat, 0.0) + mm2
    return out


def draw(docs: list[dict[str, Any]], path: Path) -> None:
    """Stacked bars of the breakdown, one per chip, with the published area marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    docs = [{**d, "components": _categories(d["components"])} for d in docs]
    names = [c for c in CATEGORIES if any(c in d["components"] for d in docs)]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(docs) + 2.5), 4.5))
    x = range(len(docs))
    bottom = [0.0] * len(docs)
    cmap = plt.get_cmap("tab20")
    for j, name in enumerate(names):
        vals = [d["components"].get(name, 0.0) for d in docs]
        ax.bar(x, vals, bottom=bottom, label=name, color=cmap(j % 20), width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    for k, d in enumerate(docs):
        if d["published_mm2"] is not None:
            ax.plot([k - 0.35, k + 0.35], [d["published_mm2"]] * 2, color="black", lw=1.5,
                    label="published" if k == 0 else None)
    ax.set_xticks(list(x), [d["hardware"] for d in docs], rotation=20, ha="right")
    ax.set_ylabel("die area (mm$^2$)")
    ax.set_title("Modelled die area by component")
    handles, labels = ax.get_legend_handles_labels()
    seen: dict[str, Any] = {}
    for h, label in zip(handles, labels, strict=True):
        seen.setdefault(label, h)
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
