"""Helpers of the fault suite (tests/faults): the small study every fault test runs, running
`dse study` as a process, and the checks every fault ends with: the storage's COMPLETE
trials (exactly the requested number, unique numbers) and an output folder whose files each
parse whole and agree with one another."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[2]
NAME = "faults"

# ~1.1 kB of journal per trial, ~0.1 s of search per 100 trials; its outputs (tables, one
# plot, summary, resolved study, run.json) take most of a run's 2 s.
STUDY = """\
name: faults
source: test
base: h100-sxm
parameters:
  compute.units: {low: 96, high: 144, step: 4}
  memory.HBM3.stacks: {low: 4, high: 6}
workloads:
  decode: {workload: llama2-7b, scenario: chat-decode, batch: 16}
objectives:
  t: {maximize: throughput}
search: {trials: 200, batch: 20, seed: 0}
"""

OUTPUTS = ("trials.csv", "trials.parquet", "pareto.csv", "references.csv", "parallel.png",
           "summary.md", "study.resolved.yaml", "run.json")
PNG_END = b"IEND\xaeB`\x82"


def command(trials: int, out: str = "o", *extra: str) -> list[str]:
    """The arguments of the study run every fault test repeats."""
    return ["study", "s.yaml", "--trials", str(trials), "--out", out, "-q",
            "--no-alternatives", *extra]


def dse(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dse", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dse", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def staging(folder: Path) -> list[Path]:
    """The staging folders of outputs being written (dse.search.atomic.staged)."""
    return [p for p in folder.glob(".dse-outputs-*")] if folder.is_dir() else []


def wait_for_outputs_phase(folder: Path, proc: subprocess.Popen, timeout: float = 60
                           ) -> float:
    """Poll (every 2 ms) until the run starts writing its outputs: its staging folder
    appears. The time it appeared (time.monotonic)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if staging(folder):
            return time.monotonic()
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before writing outputs: {proc.stderr.read()}")
        time.sleep(0.002)
    raise AssertionError("the run wrote no outputs")


def complete(folder: Path, journal: str = "study.journal") -> int:
    """COMPLETE trials of the study in `folder`'s journal (loading it: it must be readable),
    their numbers unique."""
    import optuna

    from dse.search.run import open_storage

    st = optuna.load_study(study_name=NAME, storage=open_storage(str(folder / journal)))
    done = [t for t in st.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE]
    numbers = [t.number for t in done]
    assert len(set(numbers)) == len(numbers), "a trial number stored twice"
    return len(done)


def leftovers(folder: Path) -> list[str]:
    """Temporary files or staging folders a run left in `folder`."""
    return sorted(p.name for p in folder.iterdir()
                  if p.name.startswith(".dse-outputs") or ".tmp" in p.name)


def outputs_consistent(folder: Path) -> int | None:
    """Assert that every output file in `folder` parses whole and that those present agree
    (the trials tables, the summary's run line and run.json count the same trials; the
    front's trials are trials of the table); the number of trials they hold (None: no
    output at all)."""
    counts: dict[str, int] = {}
    numbers = None
    if (folder / "trials.csv").exists():
        csv = pd.read_csv(folder / "trials.csv")
        counts["trials.csv"] = len(csv)
        numbers = set(csv["number"])
        assert len(numbers) == len(csv)
    if (folder / "trials.parquet").exists():
        pq = pd.read_parquet(folder / "trials.parquet")
        counts["trials.parquet"] = len(pq)
        if numbers is not None:
            assert set(pq["number"]) == numbers, "trials.csv and trials.parquet differ"
    if (folder / "pareto.csv").exists():
        front = pd.read_csv(folder / "pareto.csv")
        assert len(front) >= 1
        if numbers is not None:
            assert set(front["number"]) <= numbers, "a front trial not in trials.csv"
    if (folder / "references.csv").exists():
        assert len(pd.read_csv(folder / "references.csv")) >= 1
    if (folder / "summary.md").exists():
        text = (folder / "summary.md").read_text()
        assert text.startswith(f"# Study `{NAME}`") and text.endswith("\n")
        run = next(x for x in text.splitlines() if x.startswith("Run: "))
        counts["summary.md"] = int(run.removeprefix("Run: ").split(" trials")[0]
                                   .replace(",", ""))
    if (folder / "run.json").exists():
        record = json.loads((folder / "run.json").read_text())
        assert record["study"] == NAME
        counts["run.json"] = record["trials"]
    if (folder / "study.resolved.yaml").exists():
        doc = yaml.safe_load((folder / "study.resolved.yaml").read_text())
        assert doc["name"] == NAME and doc["search"]["trials"] >= 1
    for png in folder.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG") and data.endswith(PNG_END), f"{png.name} cut short"
    assert len(set(counts.values())) <= 1, f"outputs disagree: {counts}"
    return next(iter(counts.values()), None)


def all_outputs(folder: Path, trials: int) -> None:
    """After a run that completed: every output there, whole, holding `trials` trials, the
    journal holding exactly `trials` COMPLETE ones, nothing temporary left."""
    missing = [n for n in OUTPUTS if not (folder / n).exists()]
    assert not missing, f"outputs missing: {missing}"
    assert outputs_consistent(folder) == trials
    doc = yaml.safe_load((folder / "study.resolved.yaml").read_text())
    assert doc["search"]["trials"] == trials  # the run as requested
    assert complete(folder) == trials
    assert leftovers(folder) == []
