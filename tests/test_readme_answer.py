"""The README's answer to the paper's question is the shipped middle-ground study's own
verdict: the study is run here as a new user runs it (same seed, every alternative) and the
README's block between its verdict markers must be its summary.md's verdict, word for word."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dse.report.verdict import readme_block

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- verdict:begin -->", "<!-- verdict:end -->"


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README: one verdict block"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].lstrip("\n")


def test_readme_answer_is_the_study_verdict(tmp_path):
    out = tmp_path / "mg"
    run = subprocess.run([sys.executable, "-m", "dse", "study",
                          str(ROOT / "studies" / "middle-ground.yaml"), "--out", str(out), "-q"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    produced = readme_block((out / "summary.md").read_text())
    assert produced, "the study's summary.md has no verdict section"
    assert _readme_block() == produced, (
        "README.md's answer differs from the study's verdict: run `dse study "
        "studies/middle-ground.yaml && python tools/readme_answer.py`")


def test_readme_answer_names_its_numbers():
    """The block states the verdict with numbers: the best design, the references'
    ratios per workload, the near-optimal band and the alternatives."""
    block = _readme_block()
    for needed in ("**The best memory_bound", "x h100-sxm", "Within the model's error",
                   "Which assumptions it rests on", "designs are feasible"):
        assert needed in block, needed
