"""Copy the verdict of the shipped middle-ground study into the README's answer section.

    dse study studies/middle-ground.yaml          # writes runs/middle-ground/summary.md
    python tools/readme_answer.py                 # README.md's block := its verdict

The block sits between the README's `<!-- verdict:begin -->` and `<!-- verdict:end -->`
lines; tests/test_readme_answer.py runs the study and fails when the two differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dse.report.verdict import readme_block

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- verdict:begin -->", "<!-- verdict:end -->"


def replace_block(readme: str, block: str) -> str:
    """`readme` with the text between its verdict markers replaced by `block`."""
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"README.md: expected the lines {BEGIN} and {END} around the answer")
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def main(argv: list[str]) -> int:
    summary = Path(argv[0]) if argv else ROOT / "runs" / "middle-ground" / "summary.md"
    if not summary.is_file():
        print(f"{summary}: not found; run `dse study studies/middle-ground.yaml` first",
              file=sys.stderr)
        return 2
    block = readme_block(summary.read_text())
    if not block:
        print(f"{summary}: no verdict section (no feasible design?)", file=sys.stderr)
        return 2
    readme = ROOT / "README.md"
    readme.write_text(replace_block(readme.read_text(), block))
    print(f"README.md: answer section replaced from {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
