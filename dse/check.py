"""`dse check`: a file of any kind is valid, and a hardware file is everything `dse eval`
needs: it loads, and where it names a process node and a compute style, the area model
prices it (a file that names a node the area model cannot use gets a warning saying why).
A study file resolves, and its budgets are weighed against the base chip and the smallest
design its ranges allow (dse.search.budget): a budget no design can meet is an error, one
the base chip alone breaks a warning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dse.errors import DseError, Issue, SpecError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.spec.inherit import read_resolved
from dse.spec.load import (
    check_lengths_file,
    detect_kind,
    issue_at,
    load_design,
    load_stack,
    load_technology,
    load_workload,
    read_yaml,
)

if TYPE_CHECKING:
    from dse.search.space import Study


def _check_design(path: Path, warn: Callable[[str], None]) -> None:
    spec, tech, why = load_design(path)
    if tech is None:
        if spec.technology is not None:  # names a node: meant to be priced
            warn(f"{path}: not priced (no area or power): {why}; dse area, the area and "
                 "power columns and the area constraints of a study need it")
        return
    try:
        area(design_batch(spec), tech)
    except DseError as e:
        data = read_resolved(path, "hardware")
        raise SpecError([issue_at(data, ("technology", "node"), str(e))]) from None


def check_file(path: Path, warnings: list[str] | None = None) -> str:
    """Validate one file of any kind; returns its kind. Raises SpecError with every issue;
    what is valid but will not do what the file seems to ask is appended to `warnings`
    (one line each, naming the file)."""
    kind = detect_kind(path, read_yaml(path))
    checker = _CHECKERS.get(kind)
    if checker is None:
        raise SpecError([Issue(str(path), 1, 1, "", f"{kind} files are not supported by this "
                                                   "version of dse")])
    found: list[str] = []
    checker(path, found.append)
    if warnings is not None:
        warnings.extend(found)
    return kind


def _check_study(path: Path, warn: Callable[[str], None]) -> None:
    from dse.search.space import load_study

    study_budgets(load_study(path), warn)


def study_budgets(study: Study, warn: Callable[[str], None], power: bool = True) -> None:
    """The study's budgets against its base chip and the smallest design its ranges allow:
    SpecError (at the constraint's key) for one no design can meet, `warn` for one the base
    chip breaks."""
    from dse.search.budget import findings

    found = findings(study, power=power)
    fatal = [f for f in found if f.fatal]
    if fatal:
        data = read_yaml(study.path, display=str(study.path))
        raise SpecError([issue_at(data, f.key, f.message) for f in fatal])
    for f in found:
        warn(f"{study.path}: {'.'.join(f.key)}: {f.message}")


def _plain(check: Callable[[Path], object]) -> Callable[[Path, Callable[[str], None]], None]:
    """A checker of a kind without warnings."""
    def run(path: Path, warn: Callable[[str], None]) -> None:
        check(path)
    return run


# What validates each kind of file `detect_kind` names (the path, a warning sink).
_CHECKERS: dict[str, Callable[[Path, Callable[[str], None]], None]] = {
    "hardware": _check_design, "technology": _plain(load_technology),
    "workload": _plain(load_workload), "lengths": _plain(check_lengths_file),
    "stack": _plain(load_stack),
    "study": _check_study,
}
