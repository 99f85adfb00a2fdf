"""Draw the pictures the README and the documentation show, with the commands they show.

    python tools/docs_pictures.py            # docs/images/*.png (the middle-ground study's
                                             # plot comes from tools/readme_answer.py)
    python tools/docs_pictures.py --out DIR  # the same pictures into DIR

Each picture is the output of one `dse` command as a user types it (PICTURES), run in a
scratch folder where the shipped hwspecs/, workloads/ and studies/ are reachable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("hwspecs", "workloads", "studies", "stacks")

STUDY = ["study", "studies/flops-vs-bandwidth.yaml", "-q"]
# picture file -> the commands that draw it, and the file they write
PICTURES: dict[str, tuple[list[list[str]], str]] = {
    "roofline-h100-llama2-70b-decode.png": (
        [["plot", "roofline", "h100-sxm", "llama2-70b", "--scenario", "chat-decode",
          "--chips", "2", "--tp", "2", "--out", "out.png"]], "out.png"),
    "flops-vs-bandwidth-parallel.png": ([STUDY], "runs/flops-vs-bandwidth/parallel.png"),
    "flops-vs-bandwidth-pareto.png": (
        [STUDY, ["plot", "pareto", "runs/flops-vs-bandwidth", "--out", "out.png"]], "out.png"),
}


def draw(out: Path) -> list[Path]:
    """Every picture of PICTURES into `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (commands, result) in PICTURES.items():
        with tempfile.TemporaryDirectory() as scratch:
            for d in SHIPPED:
                os.symlink(ROOT / d, Path(scratch) / d)
            for args in commands:
                subprocess.run([sys.executable, "-m", "dse", *args], cwd=scratch, check=True,
                               stdout=subprocess.DEVNULL)
            shutil.copyfile(Path(scratch) / result, out / name)
        written.append(out / name)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    for path in draw(parser.parse_args(argv).out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
