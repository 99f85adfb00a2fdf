"""Every example in README.md and docs/**/*.md runs as written and prints what it shows.

The conventions every page follows (the contributing guide repeats them for authors):

- ```console blocks: each line starting with `$ ` is a command (a trailing backslash
  continues it on the next line); the lines after it, up to the next command or the block's
  end, are its expected output. Each expected line must appear in the actual output (stdout
  and stderr, tables at 80 columns), in order, after collapsing runs of whitespace; a line
  `...` stands for any lines. A command exits 0, or with a documented status above 1 (2: bad
  input; 3: `dse memory`'s "does not fit") where its output is shown; never 1. Commands
  run in a scratch folder where hwspecs/, workloads/, studies/, stacks/ and validation/ of
  the repository are reachable by those names, with `dse` on PATH; the blocks of one page
  run in order in one folder, so a page can write a file and use it later.
- A block with a title (```yaml title="my-chip.yaml") is written to that file in the
  page's folder before the page's next block runs.
- ```python blocks: each a complete script, run in the page's folder; a ```text block right
  after it is its expected output, checked as above.
- ```yaml blocks that are a complete spec (a `name:` and a `source:` line) pass `dse check`
  without a warning; a hardware spec naming a process node prices (`dse area`), within 5%
  of the die area it publishes.
- A block that must not run is preceded by `<!-- example: skip (REASON) -->`, REASON one
  of SKIP_REASONS. The first ```bash block of README.md is exempt: CI runs it.

Plain `dse ...` commands run in-process through typer's CliRunner (fast); a command with
shell syntax (pipes, redirection, `&&`, variables) runs under bash. Tests are named by
file:line, so a failure names the example.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
LINKED = ("hwspecs", "workloads", "studies", "stacks", "validation")
SKIP = re.compile(r"^\s*<!--\s*example:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
# Why an example may not run: it installs software, starts a server that runs until stopped,
# needs several machines or a database server, or runs for minutes (a full study).
SKIP_REASONS = ("install", "server", "several machines", "database", "minutes")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)(?P<info>.*)$")
TITLE = re.compile(r"""title\s*=\s*["']([^"']+)["']""")
SHELL_SYNTAX = re.compile(r"[|<>;&$`*?~(){}\[\]\\]|^\s*\w+=")
TIMEOUT_S = 120
# Internal issue numbers ("issue 14") and measurement-row ids (M102, T069, TU04): not in user
# text. An upstream project's issue is written with its # ("vLLM issue #40016").
INTERNAL = re.compile(r"\bissues? \d+|\b(?:[MT]\d{3}|TU\d{2})\b", re.I)


@dataclasses.dataclass
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    body: str
    skip: str | None  # the skip marker's reason
    expected: str | None = None  # a python block's following ```text block

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *docs]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with their skip markers and (python) expected output."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        start, body = i, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence)
                                      and set(lines[i].strip()) <= set(fence[0])):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(prev)
        title = TITLE.search(m["info"])
        block = Block(page, start + 1, m["lang"].lower(), title[1] if title else None,
                      "\n".join(body) + "\n", skip["reason"] if skip else None)
        if block.lang == "text" and out and out[-1].lang == "python" \
                and out[-1].expected is None and _adjacent(lines, out[-1], start):
            out[-1].expected = block.body
            continue
        out.append(block)
    return out


def _adjacent(lines: list[str], python: Block, start: int) -> bool:
    """Only blank lines (or a short lead-in such as 'prints:') between the two blocks."""
    end = python.line + python.body.count("\n")  # the closing fence's 0-based index
    between = [t for t in lines[end + 1:start] if t.strip()]
    return len(between) <= 1 and all(len(t) < 80 for t in between)


ALL = [b for p in pages() for b in blocks(p)]
README_FIRST_BASH = next((b for b in ALL if b.page.name == "README.md"
                          and b.page.parent == ROOT and b.lang in ("bash", "sh")), None)
RUN = [b for b in ALL if b.lang in ("console", "python") and b.skip is None]
SPECS = [b for b in ALL if b.lang in ("yaml", "yml") and b.skip is None
         and re.search(r"^name:", b.body, re.M) and re.search(r"^source:", b.body, re.M)]


# --- matching ---------------------------------------------------------------------------

def _collapse(line: str) -> str:
    return " ".join(line.split())


def mismatch(expected: str, actual: str) -> str | None:
    """None when every expected line appears in `actual`, in order (`...`: any lines);
    else which line is missing."""
    got = [_collapse(t) for t in actual.splitlines()]
    pos = 0
    for want in (_collapse(t) for t in expected.splitlines()):
        if not want or want == "...":
            continue
        while pos < len(got) and want not in got[pos]:
            pos += 1
        if pos == len(got):
            return f"expected line not found (in order): {want!r}"
        pos += 1
    return None


def test_matching_rules() -> None:
    out = "a  b\nc\nd e f\n"
    assert mismatch("a b\n...\nd e", out) is None
    assert mismatch("c\nd e f", out) is None
    assert mismatch("d e f\nc", out) is not None  # out of order
    assert mismatch("x", out) is not None


# --- running a page ---------------------------------------------------------------------

def commands(body: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    out: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            out.append((cmd.strip(), []))
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block: output before the first `$ ` command: {line!r}")
        i += 1
    return [(c, "\n".join(e)) for c, e in out]


def _env(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(COLUMNS="80", NO_COLOR="1", TERM="dumb", MPLBACKEND="Agg",
               PYTHONHASHSEED="0")
    env.pop("FORCE_COLOR", None)
    return env


@contextlib.contextmanager
def _inside(folder: Path):
    old_cwd, old_cols = Path.cwd(), os.environ.get("COLUMNS")
    os.chdir(folder)
    os.environ["COLUMNS"] = "80"
    try:
        yield
    finally:
        os.chdir(old_cwd)
        if old_cols is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_cols


def run_command(cmd: str, folder: Path) -> tuple[int, str]:
    """(exit status, stdout + stderr) of one console command."""
    words = shlex.split(cmd) if not SHELL_SYNTAX.search(cmd) else None
    if words and words[0] == "dse":
        from dse.cli import app

        with _inside(folder):
            result = CliRunner().invoke(app, words[1:], catch_exceptions=True)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{cmd}: raised {result.exception!r}") from result.exception
        return result.exit_code, result.stdout + result.stderr
    proc = subprocess.run(["bash", "-c", cmd], cwd=folder, env=_env(folder), text=True,
                          capture_output=True, timeout=TIMEOUT_S)
    return proc.returncode, proc.stdout + proc.stderr


def run_block(block: Block, folder: Path) -> str | None:
    """None when the block runs as shown, else what went wrong."""
    if block.title and block.lang not in ("console", "python"):
        (folder / block.title).parent.mkdir(parents=True, exist_ok=True)
        (folder / block.title).write_text(block.body)
        return None
    if block.lang == "console":
        for cmd, expected in commands(block.body):
            status, output = run_command(cmd, folder)
            shown = bool(expected.strip())
            if status != 0 and not (status > 1 and shown):
                return f"$ {cmd}\nexit status {status}:\n{output[-3000:]}"
            problem = mismatch(expected, output)
            if problem:
                return f"$ {cmd}\n{problem}\nactual output:\n{output[-3000:]}"
        return None
    if block.lang == "python":
        if block.title:
            (folder / block.title).write_text(block.body)
        proc = subprocess.run([sys.executable, "-c", block.body], cwd=folder,
                              env=_env(folder), text=True, capture_output=True,
                              timeout=TIMEOUT_S)
        if proc.returncode != 0:
            return f"exit status {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}"
        if block.expected is not None:
            problem = mismatch(block.expected, proc.stdout + proc.stderr)
            if problem:
                return f"{problem}\nactual output:\n{proc.stdout[-3000:]}"
    return None


class PageRun:
    """The blocks of one page, run in order in one scratch folder (each at most once)."""

    def __init__(self, page: Path, folder: Path):
        self.folder = folder
        for name in LINKED:
            (folder / name).symlink_to(ROOT / name, target_is_directory=True)
        self.todo = [b for b in blocks(page) if b.skip is None
                     and (b.lang in ("console", "python") or b.title)]
        self.results: dict[int, str | None] = {}

    def result(self, block: Block) -> str | None:
        for b in self.todo:
            if b.line not in self.results:
                self.results[b.line] = run_block(b, self.folder)
            if b.line == block.line:
                break
        return self.results[block.line]


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, PageRun]:
    return {}


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example_runs(block: Block, page_runs: dict[Path, PageRun],
                      tmp_path_factory: pytest.TempPathFactory) -> None:
    if block.page not in page_runs:
        page_runs[block.page] = PageRun(block.page, tmp_path_factory.mktemp("page"))
    problem = page_runs[block.page].result(block)
    assert problem is None, f"{block.id}: {problem}"


# --- specs ------------------------------------------------------------------------------

def _spec_name(block: Block) -> str:
    return re.search(r"^name:\s*['\"]?([^'\"\s#]+)", block.body, re.M)[1]


@pytest.mark.parametrize("block", SPECS, ids=[b.id for b in SPECS])
def test_complete_spec_checks(block: Block, tmp_path: Path) -> None:
    from dse.cli import app

    path = tmp_path / (block.title or f"{_spec_name(block)}.yaml")
    path.write_text(block.body)
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 0, f"{block.id}: {result.output}"
    assert "warning" not in result.stderr, f"{block.id}: {result.stderr}"


PRICED = [b for b in SPECS if re.search(r"^technology:", b.body, re.M)
          and re.search(r"^compute:", b.body, re.M)]


def test_the_docs_show_a_priced_hardware_example() -> None:
    """A reader who copies a from-scratch chip gets one the area and cost models price."""
    assert PRICED, "no complete hardware example with `technology:` in README.md or docs/"


@pytest.mark.parametrize("block", PRICED, ids=[b.id for b in PRICED])
def test_hardware_example_prices(block: Block, tmp_path: Path) -> None:
    """A hardware example that names a process node prices (`dse area`), within 5% of the
    die area it publishes (technology.die_area)."""
    from dse.cli import app

    path = tmp_path / (block.title or f"{_spec_name(block)}.yaml")
    path.write_text(block.body)
    result = CliRunner().invoke(app, ["area", str(path), "--format", "json"])
    assert result.exit_code == 0, f"{block.id}: {result.output}"
    doc = json.loads(result.stdout)
    chip = doc[0] if isinstance(doc, list) else doc
    assert chip["total_mm2"] > 0
    published = re.search(r"die_area:\s*['\"]?([\d.]+)\s*mm2", block.body)
    if published:
        assert abs(chip["total_mm2"] / float(published[1]) - 1) < 0.05, block.id


# --- what the docs may contain ----------------------------------------------------------

def test_skips_are_few_and_say_why() -> None:
    skipped = [b for b in ALL if b.skip is not None]
    for b in skipped:
        assert any(r in b.skip.lower() for r in SKIP_REASONS), \
            f"{b.id}: skip reason {b.skip!r}; expected one naming: {', '.join(SKIP_REASONS)}"
    assert len(skipped) <= max(10, len(RUN) // 4), [b.id for b in skipped]


def test_every_shell_example_is_checked() -> None:
    """Shell examples are ```console blocks (run and checked); a bare ```bash or ```sh
    block would go unchecked (the README's first block is CI's)."""
    loose = [b.id for b in ALL if b.lang in ("bash", "sh", "shell", "zsh")
             and b.skip is None and b is not README_FIRST_BASH]
    assert not loose, f"shell blocks that are not ```console (or skip-marked): {loose}"


def test_the_readme_keeps_ci_commands_first() -> None:
    """.ci/run reads the test command from the README's first code block."""
    first = next(b for b in ALL if b.page == ROOT / "README.md")
    assert first is README_FIRST_BASH and "# tests:" in first.body


def _user_texts() -> list[tuple[str, str]]:
    texts = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in pages()
             if p != ROOT / "docs" / "validation.md"]
    if (ROOT / "CHANGELOG.md").is_file():  # included in the site by docs/changelog.md
        texts.append(("CHANGELOG.md", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")))
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_reference  # the generated reference pages: docstrings and help texts

    texts += [(f"docs/{path} (generated)", page) for path, page in docs_reference.pages().items()]
    import typer.main

    from dse.cli import app

    root = typer.main.get_command(app)
    stack = [("dse", root)]
    while stack:
        name, cmd = stack.pop()
        helps = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        texts.append((f"{name} --help", "\n".join(helps)))
        stack += [(f"{name} {n}", c) for n, c in getattr(cmd, "commands", {}).items()]
    return texts


def test_no_internal_ids_in_user_text() -> None:
    """User text names no internal issue number ("issue 14") or measurement-row id
    ("M102", "T069"); the validation page, which lists the rows, is the exception."""
    found = [f"{where}: {m.group(0)!r} in {text[max(0, m.start() - 40):m.end() + 20]!r}"
             for where, text in _user_texts() for m in INTERNAL.finditer(text)]
    assert not found, "\n".join(found)


def test_internal_id_pattern() -> None:
    hits = [m.group(0) for m in INTERNAL.finditer(
        "issue 14, Issue 3, M102, T069, TU04 but not H100, MI300X, M2 Ultra, T4, tu04x, "
        "vLLM issue #40016")]
    assert hits == ["issue 14", "Issue 3", "M102", "T069", "TU04"]


def test_console_parsing() -> None:
    body = "$ dse list \\\n    workload\nbert-base\n...\n$ echo hi\nhi\n"
    assert commands(body) == [("dse list workload", "bert-base\n..."), ("echo hi", "hi")]
    page = ROOT / "README.md"
    assert all(b.line >= 1 for b in blocks(page))


def test_cli_runner_and_bash_agree(tmp_path: Path) -> None:
    """The in-process route and the shell route print the same for one command."""
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    status_a, out_a = run_command("dse list workload", tmp_path)
    if shutil.which("dse", path=f"{Path(sys.executable).parent}") is None:
        pytest.skip("no dse script beside this interpreter")
    status_b, out_b = run_command("dse list workload | cat", tmp_path)
    assert status_a == status_b == 0
    assert _collapse(out_a) == _collapse(out_b)

