"""The answer to the paper's question, in the README (a few lines) and on the documentation's
answer page (in full), is the shipped middle-ground study's own summary: the study is run here
as a new user runs it (same seed, every alternative) and both blocks between their markers must
be what tools/readme_answer.py makes of its summary.md, word for word."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dse.report.verdict import ANSWER_MARKERS, page_block, short_block

ROOT = Path(__file__).resolve().parents[1]


def _block(name: str) -> str:
    text = (ROOT / name).read_text()
    begin, end = ANSWER_MARKERS[name]
    assert text.count(begin) == 1 and text.count(end) == 1, f"{name}: one answer block"
    return text.split(begin, 1)[1].split(end, 1)[0].lstrip("\n")


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("answer") / "mg"
    run = subprocess.run([sys.executable, "-m", "dse", "study",
                          str(ROOT / "studies" / "middle-ground.yaml"), "--out", str(out), "-q"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    return (out / "summary.md").read_text()


FIX = ("run `dse study studies/middle-ground.yaml && python tools/readme_answer.py` "
       "(README.md and docs/answer.md)")


def test_readme_answer_is_the_study_verdict(summary: str) -> None:
    produced = short_block(summary)
    assert produced, "the study's summary.md has no verdict section"
    assert _block("README.md") == produced, f"README.md's answer differs from the study's: {FIX}"


def test_answer_page_is_the_study_summary(summary: str) -> None:
    produced = page_block(summary)
    assert produced.startswith("### Verdict")
    assert _block("docs/answer.md") == produced, \
        f"docs/answer.md differs from the study's summary: {FIX}"


def test_answer_blocks_name_their_numbers() -> None:
    """The README's lines state the best design with its numbers; the page adds the
    references' ratios per workload, the near-optimal band and the alternatives."""
    short, page = _block("README.md"), _block("docs/answer.md")
    assert "**The best memory_bound" in short and "mm2" in short and "x middle-ground" in short
    for needed in ("x h100-sxm", "Within the model's error", "Which assumptions it rests on",
                   "designs are feasible", "### Sensitivity"):
        assert needed in page, needed
