"""Bounded reading (issue 15, item 1, and item 4 for measurement CSVs).

Every reproducer of shared/repro that reaches the readers (copied to data/) gets, through
the CLI, exit code 2 and exactly one line on stderr naming the file, with no traceback; the
heavy ones run in a subprocess under a timeout and a 500 MiB address-space limit. Then the
limits themselves at their boundaries, on both YAML parsers (libyaml and pure Python).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from running import Ran, limited_python
from typer.testing import CliRunner

from dse import validate
from dse.check import check_file
from dse.cli import app
from dse.errors import DseError, ReadError, SpecError
from dse.spec import load, yamlpos
from dse.spec.load import read_resolved
from dse.spec.yamlpos import LDict, parse_yaml, read_yaml
from dse.validate import measurements

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
TIMEOUT_S = 20  # the promise is 5 s; the margin is for a loaded CI machine
MEMORY_BYTES = 500 << 20  # the promise: 500 MB
LOADERS = [yamlpos._PyLoader] + ([yamlpos._Loader] if yamlpos._Loader is not yamlpos._PyLoader
                                 else [])
runner = CliRunner()


# --- helpers ------------------------------------------------------------------------------

def dse_subprocess(*args: str, cwd: Path = DATA) -> Ran:
    """`python -m dse ARGS` from this checkout, under TIMEOUT_S and MEMORY_BYTES."""
    r, seconds = limited_python(["-m", "dse", *args], cwd, TIMEOUT_S, MEMORY_BYTES)
    return Ran(r.returncode, r.stdout, r.stderr, seconds)


def dse(*args: str | Path) -> Ran:
    """`dse ARGS` in this process, through Typer's test runner."""
    start = time.monotonic()
    r = runner.invoke(app, [str(a) for a in args])
    return Ran(r.exit_code, r.stdout, r.stderr, time.monotonic() - start)


def one_line_error(ran: Ran, name: str) -> str:
    """The single stderr line of a run that failed with exit 2 naming `name`."""
    assert "Traceback" not in ran.stdout + ran.stderr, ran.stderr
    assert ran.code == 2, (ran.code, ran.stderr)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert name in lines[0], lines[0]
    return lines[0]


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def issues(text: str, loader: type | None = None) -> list[str]:
    """The issues `parse_yaml` raises for `text`, as lines."""
    with pytest.raises(SpecError) as e:
        parse_yaml(text, "t.yaml", loader)
    return [str(i) for i in e.value.issues]


HEADER = ",".join(validate.COLUMNS)
ROW = "M1,h100-sxm,1,1,1,llama2-7b,decode,bf16,1,5,200,decode_tokens_per_s,100"


# --- the reproducers, through the CLI -----------------------------------------------------

def test_alias_bomb_is_refused_at_once():
    """H1: 617 bytes that expand to 10^8 values (66 s, 5.9 GB before)."""
    ran = dse_subprocess("check", "H1_alias_bomb.yaml")
    line = one_line_error(ran, "H1_alias_bomb.yaml:")
    assert line.startswith("H1_alias_bomb.yaml:8:45: a4[7]: aliases repeat more than "
                           "100,000 values"), line


def test_deep_nesting_is_refused():
    """T5: 500 nested lists (RecursionError before)."""
    line = one_line_error(dse_subprocess("check", "T5_deep_nesting.yaml"),
                          "T5_deep_nesting.yaml:2:72: nested[0]")
    assert line.endswith("nested deeper than 64 levels (the limit for a dse file)")


def test_recursive_alias_is_refused():
    """T5b: `a: &a [*a]` (RecursionError before)."""
    line = one_line_error(dse_subprocess("check", "T5b_recursive_alias.yaml"),
                          "T5b_recursive_alias.yaml:2:8: a[0]: ")
    assert "alias *a refers to a value that contains it" in line


def test_named_pipe_is_not_read(tmp_path):
    """H2: `dse check f.yaml` on a FIFO blocked forever; so did `dse validate`, and a
    `base:` naming one."""
    for name in ("f.yaml", "f.csv"):
        os.mkfifo(tmp_path / name)
    line = one_line_error(dse_subprocess("check", "f.yaml", cwd=tmp_path), "f.yaml")
    assert line == "f.yaml: not a regular file (a named pipe); dse reads only regular files"
    line = one_line_error(dse_subprocess("validate", "--measurements", "f.csv", cwd=tmp_path),
                          "f.csv")
    assert line == "f.csv: not a regular file (a named pipe); dse reads only regular files"
    write(tmp_path / "chip.yaml", "base: ./f.yaml\nsource: t\n")
    line = one_line_error(dse_subprocess("check", "chip.yaml", cwd=tmp_path), "f.yaml")
    assert line.endswith("(a named pipe); dse reads only regular files (referenced by base: "
                         "at chip.yaml:1:7)"), line


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_not_read():
    """H2: /dev/zero was read until MemoryError."""
    for args in (("check", "/dev/zero"), ("validate", "--measurements", "/dev/zero")):
        line = one_line_error(dse_subprocess(*args), "/dev/zero")
        assert line == ("/dev/zero: not a regular file (a character device); dse reads only "
                        "regular files")


def test_nul_byte_is_one_line():
    """T4: a NUL byte gave a two-line internal ReaderError."""
    line = one_line_error(dse("check", DATA / "T4_control_char.yaml"), "T4_control_char.yaml")
    assert line.endswith("T4_control_char.yaml: not a YAML text file: binary data (a NUL "
                         "byte at line 1, column 23)")


def test_control_character_is_refused_at_its_place(tmp_path):
    path = write(tmp_path / "c.yaml", 'source: t\ndescription: "a\x07b"\n')
    line = one_line_error(dse("check", path), "c.yaml:2:16: ")
    assert "control character U+0007 is not allowed in YAML" in line


def test_long_base_name_is_one_line():
    """T3: a `base:` of 256 characters raised ENAMETOOLONG."""
    line = one_line_error(dse("check", DATA / "T3_long_base_name.yaml"),
                          "T3_long_base_name.yaml:1:7: base: ")
    assert line.endswith("name too long (256 characters; a file name has at most 255 bytes)")


def test_long_file_name_is_one_line(tmp_path):
    name = str(tmp_path / ("b" * 300 + ".yaml"))
    assert "name too long" in one_line_error(dse("check", name), "bbbb")
    assert "name too long" in one_line_error(dse("validate", "--measurements", name), "bbbb")


def test_binary_base_names_the_binary_and_the_base_line(tmp_path):
    """U5: `base: /bin/ls` named /bin/ls but not the `base:` that referenced it."""
    blob = write(tmp_path / "blob.bin", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    chip = write(tmp_path / "chip.yaml", f"source: t\nbase: {blob}\n")
    line = one_line_error(dse("check", chip), str(blob))
    assert line == (f"{blob}: not a YAML text file: binary data (a NUL byte at line 1, "
                    f"column 8) (referenced by base: at {chip}:2:7)")
    if Path("/bin/ls").is_file():
        line = one_line_error(dse("check", DATA / "U5_base_binary.yaml"), "/bin/ls")
        assert line.startswith("/bin/ls: ") and "U5_base_binary.yaml:1:7)" in line, line


def test_latin1_base_is_named_with_the_base_line(tmp_path):
    write(tmp_path / "old.yaml", "source: caf\xe9\n".encode("latin-1"))
    chip = write(tmp_path / "chip.yaml", "base: ./old.yaml\n")
    line = one_line_error(dse("check", chip), "old.yaml:1:12: ")
    assert line.endswith("not UTF-8 text: byte 0xe9 cannot be decoded; save the file as "
                         f"UTF-8 (referenced by base: at {chip}:1:7)")


def test_python_tag_on_a_mapping_is_refused():
    """X1: `!!python/object/apply` on a mapping was silently dropped."""
    line = one_line_error(dse("check", DATA / "X1_python_tag_ignored.yaml"),
                          "X1_python_tag_ignored.yaml:3:10: compute: ")
    assert "tag !!python/object/apply:os.system is not allowed on a mapping" in line


def _chain(folder: Path, links: int) -> Path:
    """w0 -> w1 -> ... -> llama2-7b: `links` base: links from w0 (U6 has 17)."""
    for i in range(links):
        base = f"w{i + 1}" if i + 1 < links else "llama2-7b"
        write(folder / f"w{i}.yaml", f"base: {base}\nsource: chain {i}\n")
    return folder / "w0.yaml"


def test_base_chain_limit_is_the_same_for_check_and_eval(tmp_path):
    """U6: a 17-link workload chain was taken for hardware by `dse check` and accepted by
    `dse eval`; now both refuse it with the same line, and accept 16 links."""
    top = _chain(tmp_path, load.MAX_BASE_CHAIN + 1)
    checked = one_line_error(dse("check", top), "w16.yaml:1:7: base: ")
    assert "more than 16 levels of base: inheritance (w0.yaml -> w1.yaml" in checked
    assert one_line_error(dse("eval", "h100-sxm", top), "w16.yaml") == checked
    ok = dse("check", tmp_path / "w1.yaml")
    assert ok.code == 0 and ok.stdout.strip().endswith("ok (workload)"), ok
    assert load.load_workload(tmp_path / "w1.yaml").name == "w1"


def test_inheritance_cycle_is_the_same_for_check_and_eval(tmp_path):
    write(tmp_path / "a.yaml", "base: ./b.yaml\nsource: t\n")
    write(tmp_path / "b.yaml", "base: ./a.yaml\nsource: t\n")
    checked = one_line_error(dse("check", tmp_path / "a.yaml"), "a.yaml:1:7: base: ")
    assert checked.endswith("inheritance cycle: a.yaml -> b.yaml -> a.yaml")
    assert one_line_error(dse("show", tmp_path / "a.yaml"), "a.yaml") == checked


def test_folder_is_not_read(tmp_path):
    line = one_line_error(dse("check", tmp_path), str(tmp_path))
    assert line.endswith("not a regular file (a folder); dse reads only regular files")


# --- measurement CSVs ---------------------------------------------------------------------

def test_latin1_csv_is_one_line():
    """T7: UnicodeDecodeError before."""
    line = one_line_error(dse("validate", "--measurements", DATA / "T7_latin1.csv"),
                          "T7_latin1.csv:2: ")
    assert line.endswith("not UTF-8 text: byte 0xe9 at column 2 cannot be decoded; save the "
                         "file as UTF-8")


def test_csv_with_a_byte_order_mark_is_read():
    """U7: "missing column(s) id" before."""
    ran = dse("validate", "--measurements", DATA / "U7_bom.csv", "--format", "json")
    assert ran.code == 0, ran.stderr
    rows = json.loads(ran.stdout)["rows"]
    assert [r["id"] for r in rows] == ["M001"] and rows[0]["predicted"] > 0


def test_huge_csv_field_is_one_line(tmp_path):
    """T8: a field beyond the csv module's limit raised csv.Error."""
    path = write(tmp_path / "t8.csv", f'{HEADER}\n{ROW}\n{ROW},"{"x" * 200_000}"\n')
    line = one_line_error(dse("validate", "--measurements", path), "t8.csv:3: ")
    assert line.endswith("a field longer than 131,072 characters (the csv field size limit); "
                         "is this a measurements CSV?")


def test_over_long_csv_line_is_one_line(tmp_path):
    path = write(tmp_path / "wide.csv", HEADER + "\n" + "," * (validate.MAX_CSV_LINE + 1))
    line = one_line_error(dse("validate", "--measurements", path), "wide.csv:2: ")
    assert "line longer than 1,048,576 bytes" in line


def test_binary_csv_is_one_line(tmp_path):
    path = write(tmp_path / "b.csv", f"{HEADER}\n{ROW}\x00\n".encode())
    line = one_line_error(dse("validate", "--measurements", path), "b.csv:2: ")
    assert line.endswith("not a CSV text file: binary data (a NUL byte)")


def test_utf16_csv_is_one_line(tmp_path):
    path = write(tmp_path / "u.csv", f"{HEADER}\n{ROW}\n".encode("utf-16"))
    assert one_line_error(dse("validate", "--measurements", path), "u.csv:1: ").endswith(
        "UTF-16 text; save the file as UTF-8")


def test_csv_size_and_row_limits(tmp_path, monkeypatch):
    path = write(tmp_path / "m.csv", f"{HEADER}\n{ROW}\n" + ROW.replace("M1", "M2") + "\n")
    monkeypatch.setattr(measurements, "MAX_CSV_ROWS", 1)
    assert one_line_error(dse("validate", "--measurements", path), "m.csv:3: ").endswith(
        "more than 1 rows (the limit for a measurements CSV); split the file")
    monkeypatch.setattr(measurements, "MAX_CSV_ROWS", 2)
    monkeypatch.setattr(measurements, "MAX_CSV_BYTES", path.stat().st_size - 1)
    assert "file too large" in one_line_error(dse("validate", "--measurements", path), "m.csv")
    monkeypatch.setattr(measurements, "MAX_CSV_BYTES", path.stat().st_size)
    assert len(validate.read_measurements(path)) == 2


def test_csv_lines_count_blank_lines_and_crlf(tmp_path):
    path = write(tmp_path / "m.csv", f"{HEADER}\r\n{ROW}\r\n\r\n{ROW.replace('100', 'x')}\r\n")
    with pytest.raises(DseError, match=r"m\.csv:4: value: expected a number, found 'x'"):
        validate.read_measurements(path)


# --- the YAML limits at their boundaries --------------------------------------------------

@pytest.mark.parametrize("loader", LOADERS)
def test_aliases_share_one_object(loader):
    data = parse_yaml("a: &x {k: [1, 2]}\nb: *x\nc: [*x, *x]\n", "t.yaml", loader)
    assert data["a"] is data["b"] is data["c"][0] is data["c"][1]
    assert data["b"] == {"k": [1, 2]} and data.val_pos["b"].line == 1  # where it is written


@pytest.mark.parametrize("loader", LOADERS)
def test_alias_expansion_limit(loader, monkeypatch):
    monkeypatch.setattr(yamlpos, "MAX_ALIAS_NODES", 30)
    def text(uses: int) -> str:  # each use repeats 3 values
        return "a: &a [1, 2]\nb: [" + ", ".join(["*a"] * uses) + "]\n"

    assert parse_yaml(text(10), "t.yaml", loader)["b"][9] == [1, 2]
    assert issues(text(11), loader) == [
        "t.yaml:2:45: b[10]: aliases repeat more than 30 values (*a here); a dse file may "
        "repeat at most that many through aliases"]


@pytest.mark.parametrize("loader", LOADERS)
def test_alias_expansion_counts_nested_aliases(loader):
    """Each level of H1 counts the values it stands for, expanded."""
    lines = ["a0: &a0 [" + ", ".join(["x"] * 10) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 5)]
    found = issues("\n".join(lines) + "\n", loader)
    assert len(found) == 1 and "a4[" in found[0] and "more than 100,000 values" in found[0]


@pytest.mark.parametrize("loader", LOADERS)
def test_nesting_limit(loader):
    def nested(levels: int) -> str:  # the top-level mapping is one level
        return "a: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"

    parse_yaml(nested(yamlpos.MAX_DEPTH), "t.yaml", loader)
    found = issues(nested(yamlpos.MAX_DEPTH + 1), loader)
    assert found == ["t.yaml:1:67: a[0][0][0][0][0]…[0][0]: nested deeper than 64 levels "
                     "(the limit for a dse file)"]


@pytest.mark.parametrize("loader", LOADERS)
def test_nesting_limit_counts_aliases_expanded(loader):
    deep = "[" * 40 + "]" * 40
    assert "with *d expanded" in issues(f"d: &d {deep}\ne: {'[' * 30}*d{']' * 30}\n",
                                        loader)[0]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("text", ["a: &a {b: *a}\n", "a: &a {<<: *a, b: 1}\n",
                                  "a: &a [1, {b: *a}]\n"])
def test_recursive_aliases_are_refused(loader, text):
    assert "refers to a value that contains it" in issues(text, loader)[0]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(("text", "tag", "kind"), [
    ("a: !!python/object/apply:os.system {b: 1}\n", "!!python/object/apply:os.system",
     "mapping"),
    ("a: !!python/name:os.system x\n", "!!python/name:os.system", "value"),
    ("a: !!binary aGk=\n", "!!binary", "value"),
    ("a: !!set {b: null}\n", "!!set", "mapping"),
    ("a: !!omap [b: 1]\n", "!!omap", "list"),
    ("a: !custom 1\n", "!custom", "value"),
    ("a: !!str {b: 1}\n", "!!str", "mapping"),
    ("? !!python/tuple [1, 2]\n: x\n", "!!python/tuple", "list"),
])
def test_tags_other_than_the_standard_ones_are_refused(loader, text, tag, kind):
    found = issues(text, loader)
    assert len(found) == 1 and f"tag {tag} is not allowed on a {kind}" in found[0], found


@pytest.mark.parametrize("loader", LOADERS)
def test_standard_tags_and_plain_values_are_read(loader):
    data = parse_yaml("a: !!str 5\nb: !!float 1\nc: ! x\nd: =\ne: !!map {f: !!seq [1]}\n"
                      "g: &g {h: 1}\ni: {<<: *g, j: 2}\n", "t.yaml", loader)
    assert data == {"a": "5", "b": 1.0, "c": "x", "d": "=", "e": {"f": [1]},
                    "g": {"h": 1}, "i": {"h": 1, "j": 2}}


SHIPPED = [load.library_dir(kind) / f"{name}.yaml" for kind in load.LIBRARY_FOLDERS
           if kind != "validation" for name in load.library_names(kind)]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_both_parsers_read_the_shipped_specs_alike(path):
    text = path.read_text(encoding="utf-8")
    read = [parse_yaml(text, path.name, loader) for loader in LOADERS]
    assert all(r == read[0] and r.key_pos == read[0].key_pos for r in read)
    assert read[0] == yaml.safe_load(text)


def test_spec_size_limit(tmp_path):
    limit = yamlpos.MAX_SPEC_BYTES
    text = "source: t\n#" + "x" * (limit - 12) + "\n"
    assert len(text) == limit and read_yaml(write(tmp_path / "ok.yaml", text)) == {
        "source": "t"}
    with pytest.raises(ReadError, match=r"big\.yaml: file too large \(over 262,144 bytes, "
                                        r"the limit for a YAML spec\)"):
        read_yaml(write(tmp_path / "big.yaml", text + "\n"))


def test_byte_order_marks(tmp_path):
    """A UTF-8 byte-order mark is accepted (YAML allows it); UTF-16 is refused at 1:1."""
    path = write(tmp_path / "bom.yaml", "\ufeffsource: t\nname: x\n")
    assert read_yaml(path) == {"source": "t", "name": "x"}
    assert read_yaml(path).key_pos["name"].line == 2
    path = write(tmp_path / "u16.yaml", "source: t\n".encode("utf-16"))
    with pytest.raises(ReadError, match=r"u16\.yaml:1:1: UTF-16 text; save the file as UTF-8"):
        read_yaml(path)


def test_non_utf8_yaml_is_refused_at_its_place(tmp_path):
    path = write(tmp_path / "l1.yaml", "source: t\nname: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ReadError, match=r"l1\.yaml:2:10: not UTF-8 text: byte 0xe9"):
        read_yaml(path)


# --- shared values are never modified by inheritance --------------------------------------

def test_overriding_an_aliased_value_leaves_its_other_uses(tmp_path):
    write(tmp_path / "base.yaml", "source: t\nlevels: &l {name: L1, size: [1, 2]}\n"
                                  "also: *l\nlist: [*l]\n")
    write(tmp_path / "derived.yaml", "base: ./base.yaml\nlevels: {size: [3]}\n")
    merged = read_resolved(tmp_path / "derived.yaml", "workload")
    assert merged["levels"] == {"name": "L1", "size": [3]}
    assert merged["also"] == merged["list"][0] == {"name": "L1", "size": [1, 2]}
    assert merged["also"] is merged["list"][0]
    assert read_yaml(tmp_path / "base.yaml")["levels"]["size"] == [1, 2]


def test_a_new_die_drops_facts_without_touching_shared_values(tmp_path):
    """Dropping the base's die facts (`technology.die_area` ...) builds a new mapping: the
    same mapping reached through an alias elsewhere keeps them."""
    write(tmp_path / "base.yaml", "source: t\ntechnology: &t {node: n7, die_area: 800 mm2, "
                                  "same_die: true}\nspare: *t\n")
    write(tmp_path / "derived.yaml", "base: ./base.yaml\nsource: d\n")
    merged = read_resolved(tmp_path / "derived.yaml", "hardware")
    assert merged["technology"] == {"node": "n7"}
    assert merged["spare"] == {"node": "n7", "die_area": "800 mm2", "same_die": True}
    write(tmp_path / "same.yaml", "base: ./base.yaml\ntechnology: {same_die: true}\n")
    merged = read_resolved(tmp_path / "same.yaml", "hardware")
    assert merged["technology"] == {"node": "n7", "die_area": "800 mm2", "same_die": True}


def test_reading_twice_gives_the_same_data(tmp_path):
    write(tmp_path / "base.yaml", "source: t\na: &a {b: [1]}\nc: *a\n")
    write(tmp_path / "d.yaml", "base: ./base.yaml\na: {b: [2]}\n")
    first = read_resolved(tmp_path / "d.yaml", "workload")
    assert read_resolved(tmp_path / "d.yaml", "workload") == first
    assert isinstance(first, LDict) and first["c"] == {"b": [1]}


def test_check_file_reports_the_kind_through_a_chain(tmp_path):
    top = _chain(tmp_path, 3)
    assert check_file(top) == "workload"
