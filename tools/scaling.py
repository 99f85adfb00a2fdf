"""Measure how a study's trials/s scale with workers, and write the table into the README.

    python tools/scaling.py                                   # journal only, print the table
    python tools/scaling.py --postgres postgresql://dse@127.0.0.1:5433/dse --readme

Runs the shipped middle-ground study (its search alone, no alternatives, no outputs) for
`--trials` trials (default 10,000) in a fresh storage per case: the sampler alone on an
in-memory storage (what a run costs without any storage), then `--workers` 1, 2 and 4 on
the default journal and, with `--postgres`, on that database (each case a study of its own
name, deleted after). Wall time includes starting the worker processes. `--readme` puts the
table between the README's `<!-- scaling:begin -->` and `<!-- scaling:end -->` lines.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import uuid
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- scaling:begin -->", "<!-- scaling:end -->"


def _case(trials: int, workers: int, storage: str | None, memory: bool = False) -> float:
    """Seconds for `trials` trials of the middle-ground study's search."""
    from dse.search import memo
    from dse.search import run as runner
    from dse.search.space import load_study

    out = Path(tempfile.mkdtemp(prefix="dse-scaling-"))
    name = f"scaling-{uuid.uuid4().hex[:8]}"  # a study of its own in a shared database
    text = (ROOT / "studies" / "middle-ground.yaml").read_text()
    (out / "study.yaml").write_text(text.replace("name: middle-ground", f"name: {name}", 1))
    study = load_study(out / "study.yaml")
    memo.clear()
    opts = runner.Options(trials=trials, out=out, storage=storage, workers=workers)
    real = runner.open_storage
    if memory:
        runner.open_storage = lambda url: optuna.storages.InMemoryStorage()  # type: ignore
    try:
        started = time.perf_counter()
        prog = runner.run(study, opts)
        wall = time.perf_counter() - started
    finally:
        runner.open_storage = real
    assert prog.done == trials, (prog.done, trials)
    if storage is not None:
        optuna.delete_study(study_name=name, storage=storage)
    return wall


def table(trials: int, postgres: str | None, counts: list[int]) -> str:
    rows = []
    base = _case(trials, 1, None, memory=True)
    rows.append(("sampler alone (in memory)", 1, base, None))
    for name, url in (("journal", None), ("PostgreSQL", postgres)):
        if name == "PostgreSQL" and url is None:
            continue
        one = None
        for n in counts:
            wall = _case(trials, n, url)
            one = one or wall
            rows.append((name, n, wall, one / wall))
    cpus = os.cpu_count()
    lines = [f"{trials:,} trials of `studies/middle-ground.yaml` (its search alone), measured "
             f"with `python tools/scaling.py` on {cpus} CPU cores "
             f"({platform.processor() or platform.machine()}), Python "
             f"{platform.python_version()}, Optuna {optuna.__version__}; wall time includes "
             "starting the workers:", "",
             "| storage | workers | wall (s) | trials/s | speed-up over one worker |",
             "|---|---:|---:|---:|---:|"]
    for name, n, wall, up in rows:
        lines.append(f"| {name} | {n} | {wall:.1f} | {trials / wall:,.0f} | "
                     f"{'' if up is None else f'{up:.2f}x'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--postgres", help="a database URL to measure too")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    ap.add_argument("--readme", action="store_true", help="write the table into README.md")
    args = ap.parse_args()
    text = table(args.trials, args.postgres, [int(w) for w in args.workers.split(",")])
    print(text)
    if args.readme:
        readme = ROOT / "README.md"
        head, sep, rest = readme.read_text().partition(BEGIN)
        _, sep2, tail = rest.partition(END)
        if not sep or not sep2:
            raise SystemExit(f"README.md: expected the lines {BEGIN} and {END}")
        readme.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
