"""The documentation site builds strictly (broken links, missing pages and every other warning
fail it), and its generated reference covers the code: every schema field, every command and
option, every name of the Python API, every metric and every measured row. The coverage is
checked by walking the code here, independently of the generator (tools/docs_reference.py),
against the built HTML."""

from __future__ import annotations

import csv
import html
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]


def _build(dest: Path, seed: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONHASHSEED=seed, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(dest)],
                          cwd=ROOT, env=env, text=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("site")
    result = _build(dest, "1")
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log[-5000:]}"
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    return dest


# Where a schema page's field tables end: the design vocabulary and the shipped files follow.
FIELDS_END = re.compile(r'<h2 id="(?:paths-a-design-can-vary|shipped-)')


def _html(site: Path, page: str, fields_only: bool) -> str:
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    raw = raw.split("<article", 1)[-1].split("</article>", 1)[0]
    return FIELDS_END.split(raw, maxsplit=1)[0] if fields_only else raw


def page_text(site: Path, page: str, fields_only: bool = False) -> str:
    """The visible text of a built page (tags dropped, entities decoded); `fields_only`: up
    to the end of a schema page's field tables."""
    raw = _html(site, page, fields_only)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", raw)).split())


def code_spans(site: Path, page: str, fields_only: bool = False) -> set[str]:
    return {html.unescape(re.sub(r"<[^>]+>", "", c))
            for c in re.findall(r"<code[^>]*>(.*?)</code>", _html(site, page, fields_only),
                                flags=re.S)}


# --- schema fields ----------------------------------------------------------------------

def _models_in(ann: object) -> list[type[BaseModel]]:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [m for a in typing.get_args(ann) for m in _models_in(a)]


def reachable_fields(roots: list[type[BaseModel]]) -> list[tuple[type[BaseModel], str]]:
    """(model, field name) of every field of the roots and every model they nest."""
    seen: list[type[BaseModel]] = []
    todo = list(roots)
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.append(model)
        for info in model.model_fields.values():
            todo += _models_in(info.annotation)
    return [(m, name) for m in seen for name in m.model_fields]


def _schema_roots() -> dict[str, list[type[BaseModel]]]:
    from dse.spec.hardware import HardwareSpec
    from dse.spec.lengths import LengthDistribution, ShippedFile
    from dse.spec.stack import Stack
    from dse.spec.study import StudySpec
    from dse.spec.technology import TechSpec
    from dse.spec.workload import WORKLOAD_SCHEMAS

    return {"reference/hardware": [HardwareSpec],
            "reference/workload": list(WORKLOAD_SCHEMAS.values()),
            "reference/study": [StudySpec],
            "reference/lengths": [LengthDistribution, ShippedFile],
            "reference/technology": [TechSpec],
            "reference/stack": [Stack]}


@pytest.mark.parametrize("page", list(_schema_roots()))
def test_every_schema_field_is_documented(site: Path, page: str) -> None:
    """Each field is a key path (its last segment the field's name) and its docstring's
    words are on the page."""
    spans = code_spans(site, page, fields_only=True)
    tails = {re.split(r"\.|\[\]\.", s)[-1] for s in spans}
    # compared without whitespace: code spans add spaces around them
    text = re.sub(r"\s+", "", page_text(site, page, fields_only=True))
    missing = []
    for model, name in reachable_fields(_schema_roots()[page]):
        if name not in tails:
            missing.append(f"{model.__name__}.{name}: no key path")
        doc = re.sub(r"\s+", "", (model.model_fields[name].description or "").replace("`", ""))
        if doc and doc[:60] not in text:
            missing.append(f"{model.__name__}.{name}: description {doc[:60]!r}")
    assert not missing, "\n".join(missing)


def _rows_without_description(raw: str) -> list[str]:
    """The first cell of each body row, in a table whose last column is `description`, whose
    description cell is empty (a field table, or the design vocabulary's)."""
    empty = []
    for tab in re.findall(r"<table>(.*?)</table>", raw, flags=re.S):
        heads = [h.strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", tab, flags=re.S)]
        if not heads or heads[-1] != "description":
            continue
        for row in re.findall(r"<tr>(.*?)</tr>", tab.split("<tbody>", 1)[-1], flags=re.S):
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
            if cells and not re.sub(r"<[^>]+>", "", cells[-1]).strip():
                empty.append(html.unescape(re.sub(r"<[^>]+>", "", cells[0])))
    return empty


@pytest.mark.parametrize("page", list(_schema_roots()))
def test_every_field_row_has_a_description(site: Path, page: str) -> None:
    """No key of a schema page (nor a path of the design vocabulary) has an empty
    description: each field has a docstring, or repeats one with Field(description=...)."""
    raw = _html(site, page, fields_only=False)
    assert "<th>description</th>" in raw, f"{page}: no field table"
    empty = _rows_without_description(raw)
    assert not empty, f"{page}: rows without a description: {empty}"


def test_every_schema_field_has_a_description() -> None:
    """The same at the source, without a build: every field reachable from the schema roots
    has a description, or is a section whose class says what it is (the generator's
    fallback)."""
    missing = sorted({f"{model.__name__}.{name}"
                      for roots in _schema_roots().values()
                      for model, name in reachable_fields(roots)
                      if not (model.model_fields[name].description or "").strip()
                      and not any((m.__doc__ or "").strip() for m in
                                  _models_in(model.model_fields[name].annotation))})
    assert not missing, f"fields without a description: {missing}"


def test_a_repeated_field_shares_its_description() -> None:
    """A study workload's scenario fields and an alternative's changes take the text of the
    field they repeat (dse.spec.types.same_as), so the two cannot drift apart."""
    from dse.spec.scenario import Scenario
    from dse.spec.study import (
        ConstraintChange,
        Constraints,
        Parameter,
        ParameterChange,
        StudyWorkload,
    )

    # a study workload's `stack` says its own default (the scenario's, not the vendor's)
    own = {(StudyWorkload, "stack")}
    for copy, original in ((StudyWorkload, Scenario), (ParameterChange, Parameter),
                           (ConstraintChange, Constraints)):
        shared = {n for n in set(copy.model_fields) & set(original.model_fields)
                  if (copy, n) not in own}
        assert shared, copy
        for name in shared:
            assert copy.model_fields[name].description == \
                original.model_fields[name].description, f"{copy.__name__}.{name}"


def test_schema_pages_state_units(site: Path) -> None:
    text = page_text(site, "reference/hardware")
    assert "bandwidth: B/s, e.g. '3.35 TB/s'" in text
    assert "memory[].bandwidth" in code_spans(site, "reference/hardware")


def test_schema_pages_list_the_shipped_files(site: Path) -> None:
    from dse.spec.library import library_names

    for page, kind in (("reference/hardware", "hardware"), ("reference/workload", "workload"),
                       ("reference/study", "study"), ("reference/technology", "technology"),
                       ("reference/stack", "stack"), ("reference/lengths", "lengths")):
        spans = code_spans(site, page)
        assert set(library_names(kind)) <= spans, (page, set(library_names(kind)) - spans)


# --- commands, API, metrics, validation -------------------------------------------------

def test_every_command_and_option_is_documented(site: Path) -> None:
    import typer.main

    from dse.cli import app

    text = page_text(site, "reference/cli")
    spans = code_spans(site, "reference/cli")
    missing = []
    todo = [("dse", typer.main.get_command(app))]
    while todo:
        name, cmd = todo.pop()
        if name != "dse" and f"{name} ¶" not in text and name not in spans:
            missing.append(name)
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            for opt in [*p.opts, *getattr(p, "secondary_opts", [])]:
                shown = opt if opt.startswith("-") else (p.metavar or opt).upper()
                if not any(shown in s for s in spans):
                    missing.append(f"{name} {shown}")
        todo += [(f"{name} {n}", c) for n, c in getattr(cmd, "commands", {}).items()
                 if not getattr(c, "hidden", False)]
    assert not missing, missing


def test_every_api_name_is_documented(site: Path) -> None:
    import dse

    spans = code_spans(site, "reference/api")
    assert {f"dse.{n}" for n in dse.__all__} <= spans
    text = page_text(site, "reference/api")
    for name in ("columns", "op_records", "metrics", "feasible"):  # Evaluation's members
        assert name in spans, name
    assert "object at 0x" not in text  # no address in a signature


def test_every_metric_is_documented(site: Path) -> None:
    from dse.model.metrics import METRICS

    spans = code_spans(site, "reference/metrics")
    text = page_text(site, "reference/metrics")
    for m in METRICS.values():
        assert m.key in spans, m.key
        assert " ".join(m.meaning.split())[:50] in text, m.key


def test_validation_page_lists_every_measured_row(site: Path) -> None:
    text = page_text(site, "validation")
    ids = []
    for path in sorted((ROOT / "validation").glob("*.csv")):
        with path.open(newline="") as f:
            ids += [row["id"] for row in csv.DictReader(f) if row.get("id")]
    assert ids
    missing = [i for i in ids if not re.search(rf"\b{re.escape(i)}\b", text)]
    assert not missing, missing
    assert "<!-- dse-validate" not in (site / "validation" / "index.html").read_text()
    png = site / "assets" / "generated" / "validation.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nothing_is_kept_by_hand_under_reference() -> None:
    kept = [p for p in (ROOT / "docs" / "reference").rglob("*.md")] \
        if (ROOT / "docs" / "reference").is_dir() else []
    assert not kept, f"docs/reference/ is generated at build time: {kept}"


def test_the_build_is_deterministic(site: Path, tmp_path: Path) -> None:
    """A second build (another hash seed) writes the same generated pages."""
    result = _build(tmp_path / "again", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    pages = [p.relative_to(site) for p in sorted((site / "reference").rglob("index.html"))]
    pages += [Path("validation/index.html"), Path("assets/generated/validation.png")]
    for page in pages:
        assert (site / page).read_bytes() == (tmp_path / "again" / page).read_bytes(), page
