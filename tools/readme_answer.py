"""Copy the answer of the shipped middle-ground study into the README and the answer page.

    dse study studies/middle-ground.yaml          # writes runs/middle-ground/summary.md
    python tools/readme_answer.py                 # README.md and docs/answer.md := its answer

README.md gets the verdict's first paragraph between its `<!-- verdict:begin -->` and
`<!-- verdict:end -->` lines; docs/answer.md gets the summary from its verdict on between its
`<!-- summary:begin -->` and `<!-- summary:end -->` lines, and the study's Pareto plot as
docs/images/middle-ground-pareto.png. tests/test_readme_answer.py runs the study and fails
when they differ.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from dse.report.verdict import ANSWER_MARKERS, page_block, short_block

ROOT = Path(__file__).resolve().parents[1]


def replace_block(text: str, block: str, begin: str, end: str, name: str) -> str:
    """`text` with the lines between its `begin` and `end` markers replaced by `block`."""
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise SystemExit(f"{name}: expected the lines {begin} and {end} around the answer")
    return f"{head}{begin}\n{block}{end}{tail}"


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "runs" / "middle-ground"
    summary = folder / "summary.md"
    if not summary.is_file():
        print(f"{summary}: not found; run `dse study studies/middle-ground.yaml` first",
              file=sys.stderr)
        return 2
    text = summary.read_text()
    blocks = {"README.md": short_block(text), "docs/answer.md": page_block(text)}
    if not all(blocks.values()):
        print(f"{summary}: no verdict section (no feasible design?)", file=sys.stderr)
        return 2
    for name, block in blocks.items():
        path = ROOT / name
        path.write_text(replace_block(path.read_text(), block, *ANSWER_MARKERS[name], name))
        print(f"{name}: answer replaced from {summary}")
    shutil.copyfile(folder / "pareto.png", ROOT / "docs" / "images" / "middle-ground-pareto.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
