"""Hypothesis strategies that mutate the shipped files (issue 15, item 5).

A case starts from a shipped hardware, workload, study, process-node or lengths YAML, or
measurement CSV, and applies a few mutations: on the parsed tree (delete, duplicate, rename
or add a key; a wrong type; an extreme or non-finite number; a stripped, wrong or overflowing
unit; a value rescaled anywhere in the 1e-30..1e30 window; shared nodes, which the writer
turns into YAML aliases; deep nesting; a broken `base:` chain), then on the text (odd bytes:
NUL, control characters, Latin-1, a BOM, UTF-16; truncation; duplicated, deleted or
re-indented lines; CRLF). A `Case` holds the files to write, the main one first.
"""

from __future__ import annotations

import copy
import csv
import functools
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "hardware": sorted((ROOT / "hwspecs").glob("*.yaml")),
    "workload": sorted((ROOT / "workloads").glob("*.yaml")),
    "study": sorted((ROOT / "studies").glob("*.yaml")),
    "tech": sorted((ROOT / "hwspecs" / "tech").glob("*.yaml")),
    "lengths": sorted((ROOT / "workloads" / "lengths").glob("*.yaml")),
    "measurements": sorted((ROOT / "validation").glob("*.csv")),
}
MAIN = "spec.yaml"


@dataclass
class Case:
    files: dict[str, bytes]  # name -> content; the first is the main file
    steps: list[str] = field(default_factory=list)  # what was done, for the report

    @property
    def main(self) -> str:
        return next(iter(self.files))

    def write(self, folder: Path) -> Path:
        for name, data in self.files.items():
            (folder / name).write_bytes(data)
        return folder / self.main

    def __repr__(self) -> str:  # hypothesis prints this for a failing example
        head = self.files[self.main][:3000]
        return f"Case(steps={self.steps!r}, main={head!r}, others={list(self.files)[1:]!r})"


# --- values ----------------------------------------------------------------------------------

NUMBER_TEXTS = ["0", "-0", "-1", "1", "0.5", "3.35", "17", "1e308", "-1e308", "1e-320",
                "5e-324", "2.2e-308", "1e-300", "1e-30", "1e30", "1e-31", "1e31", "nan",
                "NaN", ".nan", "inf", "-inf", ".inf", "1e400", "9007199254740992",
                "9007199254740993", "1" + "0" * 320, "0x10", "1_000", "1,5", "1.5.5", "+1",
                "1e+30", "0e0", "", " ", "1e", "e3"]
UNITS = ["", "B", "KiB", "MiB", "GiB", "TiB", "KB", "kB", "MB", "GB", "TB", "b", "bit",
         "Gbit", "B/s", "GB/s", "TB/s", "GiB/s", "B/cycle", "W", "mW", "kW", "mm2", "mm^2",
         "mm3", "um2", "s", "ms", "us", "ns", "Hz", "MHz", "GHz", "FLOP/s", "TFLOPS",
         "FLOP/cycle", "OP/cycle", "pJ/FLOP", "pJ/B", "J", "mm2/MiB", "mm2/TFLOPS", "W/mm2",
         "%", "TB^30", "GiB^-1", "s^-1", "GiB GiB", "B/s/s", "cycle", "1/s", "FLOP"]
ODD_SCALARS = [None, True, False, 0, -1, 1, 2, 2**53, 2**53 + 1, 10**400, -(10**400), 1e308,
               -1e308, 1e-320, 5e-324, math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, 1.5, "",
               " ", "abc", "max", "best", "remove", "\n", "a\nb", "\t", "null", "~", "yes",
               "1e999", "é", "\u2028", "x" * 300]
_NUMBER_UNIT = re.compile(r"^\s*([-+]?[0-9][0-9_.]*(?:[eE][-+]?[0-9]+)?)\s*(.*)$")


def _unit_of(value: object) -> str | None:
    if isinstance(value, str):
        m = _NUMBER_UNIT.match(value)
        if m:
            return m.group(2)
    return None


@st.composite
def in_window(draw: st.DrawFn, like: object) -> object:
    """A value like `like` (same unit, same type) anywhere from 1e-30 to 1e30: usually
    valid, and the model's corners."""
    exponent = draw(st.integers(-30, 30))
    mantissa = draw(st.sampled_from([1.0, 1.5, 2.5, 4.0, 9.99]))
    unit = _unit_of(like)
    if unit is not None:
        return f"{mantissa}e{exponent} {unit}".rstrip()
    if isinstance(like, bool):
        return not like
    if isinstance(like, int):
        return draw(st.sampled_from([0, 1, 2, 3, 7, 64, 1000, 2**20, 2**31, 2**53 - 1, 2**53]))
    if isinstance(like, float):
        return float(f"{mantissa}e{exponent}") if like >= 0 else -float(f"1e{exponent}")
    return draw(odd_values())


@st.composite
def quantity_texts(draw: st.DrawFn, unit: str | None = None) -> str:
    number = draw(st.sampled_from(NUMBER_TEXTS) | st.floats().map(repr) |
                  st.integers(-(2**70), 2**70).map(str))
    unit = unit if unit is not None else draw(st.sampled_from(UNITS))
    sep = draw(st.sampled_from([" ", "", "  "]))
    return f"{number}{sep}{unit}".strip() if draw(st.booleans()) else f"{number}{sep}{unit}"


def odd_values() -> st.SearchStrategy[object]:
    """Wrong types, extremes, non-finite numbers and quantities with any unit."""
    scalar = st.sampled_from(ODD_SCALARS) | quantity_texts() | st.integers() | st.floats() \
        | st.text(max_size=12)
    return scalar | st.lists(scalar, max_size=3) | st.dictionaries(
        st.sampled_from(["a", "name", "capacity", "base", "1"]), scalar, max_size=2)


# --- the tree --------------------------------------------------------------------------------

@functools.cache
def _tree(path: Path) -> object:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _paths(node: object, prefix: tuple = (), seen: set[int] | None = None) -> list[tuple]:
    """Every key path of `node`, each shared or recursive container entered once."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return []
    out = []
    if isinstance(node, dict | list):
        seen.add(id(node))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k), seen)
    return out


def _get(node: object, path: tuple) -> object:
    for p in path:
        node = node[p]  # type: ignore[index]
    return node


def _nested(depth: int, leaf: object) -> object:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"a": leaf}
    return leaf


def _bomb(levels: int, width: int) -> object:
    node: object = ["lol"] * width
    for _ in range(levels):
        node = [node] * width  # the same list, written once and aliased
    return node


TREE_OPS = ["delete", "replace", "replace", "in_window", "in_window", "in_window",
            "rename", "unknown_key", "share", "nest", "empty", "swap", "bomb"]


@st.composite
def _mutate_tree(draw: st.DrawFn, tree: object, steps: list[str]) -> object:
    paths = _paths(tree)
    if not paths:
        return draw(odd_values())
    path = draw(st.sampled_from(paths))
    parent, key = _get(tree, path[:-1]), path[-1]
    value = parent[key]
    op = draw(st.sampled_from(TREE_OPS))
    steps.append(f"{op} {'.'.join(map(str, path))}")
    if op == "delete":
        del parent[key]
    elif op == "replace":
        parent[key] = draw(odd_values())
    elif op == "in_window":
        parent[key] = draw(in_window(value))
    elif op == "rename" and isinstance(parent, dict):
        new = draw(st.sampled_from([str(key)[:-1], str(key) + "s", str(key).upper(),
                                    f"{key} ", "", "base", "name", "<<"]))
        parent[new] = parent.pop(key)
    elif op == "unknown_key" and isinstance(value, dict):
        value[draw(st.sampled_from(["bandwith", "extra", "remove", "1", "base"]))] = \
            draw(odd_values())
    elif op == "share":  # the same object at two places: the writer emits an anchor + alias
        other = _get(tree, draw(st.sampled_from(paths))[:-1])
        if isinstance(other, dict):
            other[draw(st.sampled_from(["shared", *other.keys()]))] = value
        elif isinstance(other, list):
            other.append(value)
    elif op == "nest":
        parent[key] = _nested(draw(st.integers(1, 80)), value)
    elif op == "empty":
        parent[key] = draw(st.sampled_from([[], {}, None, ""]))
    elif op == "swap":
        other_path = draw(st.sampled_from(paths))
        other_parent = _get(tree, other_path[:-1])
        parent[key], other_parent[other_path[-1]] = other_parent[other_path[-1]], value
    elif op == "bomb":
        parent[key] = _bomb(draw(st.integers(1, 7)), draw(st.integers(2, 9)))
    return tree


def _dump(tree: object) -> str:
    try:
        return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, width=100)
    except (yaml.YAMLError, RecursionError, ValueError):
        return repr(tree)


# --- base chains -----------------------------------------------------------------------------

BASE_REFS = ["does-not-exist", "./nope.yaml", "/bin/ls", "/dev/null", "/", ".", "..", "",
             "x" * 300, "a\x00b", "H100-SXM", "h100-sxm ", "h100-sxm", "llama2-7b",
             "middle-ground", "n4", "squad-v1.1", "hwspecs/h100-sxm.yaml", "~/x.yaml",
             "../../../../etc/hostname", 0, None, [], {"a": 1}]


@st.composite
def _base(draw: st.DrawFn, tree: object, kind: str, files: dict[str, bytes],
          steps: list[str]) -> None:
    """Point `tree`'s base: at something broken or long: a missing, odd or binary file, the
    file itself, a two-file cycle, or a chain of 1-20 files ending at a shipped spec."""
    if not isinstance(tree, dict):
        return
    how = draw(st.sampled_from(["ref", "self", "cycle", "chain", "chain"]))
    end = {"hardware": "h100-sxm", "workload": "llama2-7b", "study": "middle-ground"}.get(
        kind, "h100-sxm")
    if how == "ref":
        tree["base"] = draw(st.sampled_from(BASE_REFS) | st.sampled_from(
            [str(p) for ps in SHIPPED.values() for p in ps]))
    elif how == "self":
        tree["base"] = f"./{MAIN}"
    elif how == "cycle":
        tree["base"] = "./b0.yaml"
        files["b0.yaml"] = f"base: ./{MAIN}\nsource: cycle\n".encode()
    else:
        links = draw(st.integers(1, 20))
        tree["base"] = "./b0.yaml"
        for i in range(links):
            nxt = f"./b{i + 1}.yaml" if i + 1 < links else end
            files[f"b{i}.yaml"] = f"base: {nxt}\nsource: link {i}\n".encode()
    steps.append(f"base {how}: {str(tree['base'])[:40]!r}")


# --- the text --------------------------------------------------------------------------------

ODD_BYTES = [b"\x00", b"\x01", b"\x07", b"\x1b", b"\x7f", b"\xc2\x85", b"\xe2\x80\xa8",
             b"\xef\xbb\xbf", b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80", b"\t", b"\r", b"\n",
             b"\r\n", b":", b"- ", b"{", b"[", b"&a ", b"*a", b"!!python/object:os.system ",
             b"!!binary ", b"%YAML 1.1\n", b"---\n", b"...\n", b"'", b'"', b"#", b"<<: *a\n"]
TEXT_OPS = ["none", "none", "none", "odd_bytes", "bom", "truncate", "dup_line", "del_line",
            "indent", "latin1", "utf16", "crlf", "whole"]


@st.composite
def _mutate_text(draw: st.DrawFn, data: bytes, steps: list[str]) -> bytes:
    op = draw(st.sampled_from(TEXT_OPS))
    if op == "none":
        return data
    steps.append(f"text {op}")
    lines = data.splitlines(keepends=True) or [b""]
    at = draw(st.integers(0, max(len(data), 1)))
    line = draw(st.integers(0, len(lines) - 1))
    if op == "odd_bytes":
        return data[:at] + draw(st.sampled_from(ODD_BYTES)) + data[at:]
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "truncate":
        return data[:at]
    if op == "dup_line":  # a duplicate key where the line is `key: value`
        return b"".join(lines[:line + 1] + lines[line:])
    if op == "del_line":
        return b"".join(lines[:line] + lines[line + 1:])
    if op == "indent":
        pad = draw(st.sampled_from([b" ", b"\t", b"   "]))
        return b"".join([*lines[:line], pad + lines[line], *lines[line + 1:]])
    if op == "latin1":
        return data[:at] + "é".encode("latin-1") + data[at:]
    if op == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16")
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    return draw(st.sampled_from([b"", b"null", b"[]", b"{}", b"- a\n", b"42", b"a: [",
                                 b"\xef\xbb\xbf", b"\x00" * 16, b"name: x\n",
                                 b"base: h100-sxm\n", b"base: h100-sxm\nsource: x\n"]))


def _numeric(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or \
        _unit_of(value) is not None


@st.composite
def _rescale(draw: st.DrawFn, tree: object, steps: list[str]) -> object:
    """One number of `tree` (plain or with a unit) moved anywhere in the 1e-30..1e30
    window: inputs that mostly pass validation and reach the model's corners."""
    paths = [p for p in _paths(tree) if _numeric(_get(tree, p))]
    if not paths:
        return tree
    path = draw(st.sampled_from(paths))
    parent = _get(tree, path[:-1])
    parent[path[-1]] = draw(in_window(parent[path[-1]]))
    steps.append(f"in_window {'.'.join(map(str, path))} = {parent[path[-1]]!r}")
    return tree


@st.composite
def yaml_cases(draw: st.DrawFn, kind: str, *, most: int = 3) -> Case:
    """A shipped `kind` file, either with 1-4 of its numbers rescaled within the window
    (half the cases: mostly valid designs at the model's corners), or with 0-`most` hostile
    tree mutations, maybe a broken base chain, and maybe one text mutation."""
    source = draw(st.sampled_from(SHIPPED[kind]))
    steps = [f"from {source.relative_to(ROOT)}"]
    tree = copy.deepcopy(_tree(source))
    files: dict[str, bytes] = {MAIN: b""}
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            tree = draw(_rescale(tree, steps))
        files[MAIN] = _dump(tree).encode("utf-8")
        return Case(files, steps)
    for _ in range(draw(st.integers(0, most))):
        tree = draw(_mutate_tree(tree, steps))
    if draw(st.integers(0, 5)) == 0:
        draw(_base(tree, kind, files, steps))
    files[MAIN] = draw(_mutate_text(_dump(tree).encode("utf-8"), steps))
    return Case(files, steps)


# --- measurement CSVs ------------------------------------------------------------------------

@functools.cache
def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    return rows[0], rows[1:]


CELLS = ["", " ", "nan", "inf", "-inf", "-1", "0", "1e-320", "1e400", "1" + "0" * 320, "abc",
         "max", "best", "h100-sxx", "gemm:0x1x1", "gemm:1e320x4x4", "gemm:2x3",
         "gemm:4x4x4x4", "llama2-7b", "rm1", "training", "decode", "prefill", "serve",
         "inference", "gemm", "fp8", "int4", "w4a16", "bogus", "\x00", "é", "x" * 2000,
         "a\nb", '"', "1.5", "2", "8", "1024", "9007199254740993", "1e-30", "1e30"]


@st.composite
def csv_cases(draw: st.DrawFn) -> Case:
    """1-4 rows of a shipped measurement CSV with cells, columns and rows mutated."""
    source = draw(st.sampled_from(SHIPPED["measurements"]))
    header, rows = _rows(source)
    header = list(header)
    picked = [list(r) for r in draw(st.lists(st.sampled_from(rows), min_size=1, max_size=4))]
    steps = [f"from {source.relative_to(ROOT)}: {[r[0] for r in picked]}"]
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["cell", "cell", "cell", "drop_column", "dup_column",
                                   "rename_column", "dup_row", "short_row", "long_row"]))
        col = draw(st.integers(0, len(header) - 1))
        row = draw(st.integers(0, len(picked) - 1))
        steps.append(f"{op} {header[col] if col < len(header) else col} row {row}")
        if op == "cell" and col < len(picked[row]):
            picked[row][col] = draw(st.sampled_from(CELLS) | st.text(max_size=8) |
                                    st.floats().map(repr))
        elif op == "drop_column":
            del header[col]
            for r in picked:
                del r[col:col + 1]
        elif op == "dup_column":
            header.append(header[col])
            for r in picked:
                r.append(r[col] if col < len(r) else "")
        elif op == "rename_column":
            header[col] = draw(st.sampled_from(["", "ID", header[col] + " ", "hw", "value"]))
        elif op == "dup_row":
            picked.append(list(picked[row]))
        elif op == "short_row":
            picked[row] = picked[row][:col]
        elif op == "long_row":
            picked[row] = [*picked[row], "extra"]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *picked])
    data = draw(_mutate_text(out.getvalue().encode("utf-8"), steps))
    return Case({"m.csv": data}, steps)
