"""A measurements CSV (the format of shared/validation/README.md): its columns, and its rows
read within bounds (size, rows, line length), every malformed cell a DseError naming the
file and line."""

from __future__ import annotations

import codecs
import csv
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dse import phases
from dse.errors import DseError
from dse.spec import scenario_fields
from dse.spec.textfile import read_bytes

# The columns of a measurements CSV, in the order the shipped files write them. Its
# scenario columns are the scenario fields a CSV takes (dse.spec.scenario_fields: checked
# below); a column added after files were written is optional (empty or absent: the
# scenario's own value).
COLUMNS = ("id", "hardware", "chips", "tp", "pp", "workload", "phase", "precision", "batch",
           "seq_in", "seq_out", "metric", "value")
OPTIONAL_COLUMNS = ("kv_precision", "sparsity")
# Execution columns a file may add (shared/validation/README.md, current-stacks.csv): the
# context-, data- and expert-parallel degrees, blank = 1 (dp blank: what tp x pp x cp leave),
# and the software stack the row was measured on (free text, reported per stack). `notes`
# and `quote` (how a value was derived, the source's line) are read by people, not the model.
EXECUTION_COLUMNS = ("cp", "dp", "ep")
TEXT_COLUMNS = ("software",)
SCENARIO_COLUMNS = tuple(scenario_fields.FIELDS[f].column for f in scenario_fields.SIMPLE
                         if ("csv", f) not in scenario_fields.NOT_ON)
if set(SCENARIO_COLUMNS) != set(COLUMNS[6:-2]) | set(OPTIONAL_COLUMNS):
    raise ImportError(f"dse.validate: the CSV's scenario columns {COLUMNS[6:-2]} + "
                      f"{OPTIONAL_COLUMNS} differ from the scenario fields a CSV takes "
                      f"{SCENARIO_COLUMNS} (dse.spec.scenario_fields)")


def _compared(phase: str) -> tuple[str, ...]:
    """The metrics `dse validate` compares for a phase (dse.phases: Phase.compared); none
    for a phase it does not know or does not validate."""
    known = phases.REGISTRY.get(phase)
    return known.compared if known is not None else ()


# Largest measurements CSV read (docs: guide/commands.md, Input limits): some 250,000 rows as wide
# as the shipped ones (~250 bytes); the file's bytes are held while its rows are read.
MAX_CSV_BYTES = 64 << 20


# Most rows of a measurements CSV: each is held as a record of ~1 KB while the file is
# validated, so memory stays near 200 MB; 100,000-row sweeps fit.
MAX_CSV_ROWS = 200_000


# Longest line of a measurements CSV: a shipped row is ~250 bytes. A field is also limited
# by the csv module's field size limit (131,072 characters by default).
MAX_CSV_LINE = 1 << 20


def _csv_lines(data: bytes, path: Path) -> Iterator[str]:
    """The lines of a CSV file's bytes as text, one at a time (line endings kept for the
    csv module); a leading UTF-8 byte-order mark (Excel writes one) is dropped, and a line
    that is not UTF-8 text, holds a NUL byte or is too long raises DseError naming it."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DseError(f"{path}:1: UTF-16 text; save the file as UTF-8")
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    line = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        line += 1
        chunk = data[start:end]
        if len(chunk) > MAX_CSV_LINE:
            raise DseError(f"{path}:{line}: line longer than {MAX_CSV_LINE:,} bytes (the limit "
                           "for a measurements CSV)")
        if b"\0" in chunk:
            raise DseError(f"{path}:{line}: not a CSV text file: binary data (a NUL byte)")
        try:
            yield chunk.decode("utf-8")
        except UnicodeDecodeError as e:
            col = len(chunk[:e.start].decode("utf-8", "replace")) + 1
            raise DseError(f"{path}:{line}: not UTF-8 text: byte 0x{chunk[e.start]:02x} at "
                           f"column {col} cannot be decoded; save the file as UTF-8") from None
        start = end


def _csv_records(reader: csv.DictReader, path: Path) -> Iterator[tuple[int, dict]]:
    """(line, row) for each row of `reader`; a csv error raises DseError at its line."""
    while True:
        try:
            raw = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # DictReader's own line_num lags behind on an error
            raise DseError(f"{path}:{reader.reader.line_num}: {_csv_message(e)}") from None
        yield reader.line_num, raw


def _csv_message(e: csv.Error) -> str:
    text = " ".join(str(e).split())
    if text.startswith("field larger than field limit"):
        return (f"a field longer than {csv.field_size_limit():,} characters (the csv field "
                "size limit); is this a measurements CSV?")
    return f"malformed CSV: {text}"


def read_measurements(path: Path) -> list[dict]:
    """Rows of a measurements CSV; a malformed file raises DseError naming the line. Only a
    regular file of at most MAX_CSV_BYTES, UTF-8 text (with or without a byte-order mark),
    is read."""
    reader = csv.DictReader(_csv_lines(read_bytes(path, str(path), MAX_CSV_BYTES,
                                                  "a measurements CSV"), path))
    try:
        fieldnames = reader.fieldnames
    except csv.Error as e:
        raise DseError(f"{path}:{reader.reader.line_num}: {_csv_message(e)}") from None
    missing = [c for c in COLUMNS if c not in (fieldnames or [])]
    if missing:
        raise DseError(f"{path}:1: missing column(s) {', '.join(missing)}; expected the "
                       f"columns {', '.join(COLUMNS)}")
    rows: list[dict[str, Any]] = []
    for line, raw in _csv_records(reader, path):
        where = f"{path}:{line}"
        if len(rows) == MAX_CSV_ROWS:
            raise DseError(f"{where}: more than {MAX_CSV_ROWS:,} rows (the limit for a "
                           "measurements CSV); split the file")

        def number(col: str, whole: bool = False, optional: bool = False,
                   raw: dict = raw, where: str = where) -> float | None:
            v = (raw.get(col) or "").strip()
            if not v and optional:
                return None
            try:
                x = float(v)
            except ValueError:
                raise DseError(f"{where}: {col}: expected a number, found '{v}'") from None
            if not math.isfinite(x) or x <= 0 or (whole and x != int(x)):
                raise DseError(f"{where}: {col}: expected a positive "
                               f"{'whole number' if whole else 'number'}, found '{v}'")
            return x

        phase = (raw["phase"] or "").strip()
        compared = _compared(phase)
        if not compared:
            raise DseError(f"{where}: phase: expected one of {', '.join(compared_phases())}, "
                           f"found '{phase}'")
        metric = (raw["metric"] or "").strip()
        if metric not in compared:
            raise DseError(f"{where}: metric: expected one of {', '.join(compared)} for "
                           f"phase {phase}, found '{metric}'")
        batch = (raw["batch"] or "").strip()
        if batch != "max":
            batch = int(number("batch", whole=True))  # type: ignore[arg-type]
        chips = int(number("chips", whole=True))  # type: ignore[arg-type]
        tp = int(number("tp", whole=True))  # type: ignore[arg-type]
        pp = int(number("pp", whole=True))  # type: ignore[arg-type]
        cp, dp, ep = (number(c, whole=True, optional=True) for c in EXECUTION_COLUMNS)
        cp, ep = int(cp or 1), int(ep or 1)
        if dp is not None and chips != tp * pp * cp * dp:
            raise DseError(f"{where}: dp: expected chips = tp x pp x cp x dp ({chips}), found "
                           f"{tp} x {pp} x {cp} x {int(dp)} = {tp * pp * cp * int(dp)}")
        rows.append({  # the repeated names interned: one copy for all rows
            "id": (raw["id"] or "").strip() or f"line {line}", "line": line,
            "hardware": sys.intern((raw["hardware"] or "").strip()),
            "workload": sys.intern((raw["workload"] or "").strip()),
            "chips": chips, "tp": tp, "pp": pp, "cp": cp, "ep": ep,
            "phase": sys.intern(phase), "precision": sys.intern((raw["precision"] or "").strip()),
            "kv_precision": sys.intern((raw.get("kv_precision") or "").strip()),
            "sparsity": sys.intern((raw.get("sparsity") or "").strip()),
            "batch": batch,
            "seq_in": number("seq_in", whole=True, optional=True),
            "seq_out": number("seq_out", whole=True, optional=True),
            "metric": sys.intern(metric), "value": number("value"),
            "software": sys.intern(" ".join((raw.get("software") or "").split())),
        })
    return rows


def compared_phases() -> tuple[str, ...]:
    """The phases whose measurements `dse validate` compares."""
    return phases.those(lambda p: bool(p.compared))
