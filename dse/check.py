"""`dse check`: a file of any kind is valid, and a hardware file is everything `dse eval`
needs: it loads, and where it names a process node and a compute style, the area model
prices it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dse.errors import DseError, Issue, SpecError
from dse.model.area import area
from dse.model.batch import design_batch
from dse.spec.load import (
    check_lengths_file,
    detect_kind,
    issue_at,
    load_design,
    load_technology,
    load_workload,
    read_resolved,
    read_yaml,
)


def _check_design(path: Path) -> None:
    spec, tech, _ = load_design(path)
    if tech is None:
        return
    try:
        area(design_batch(spec), tech)
    except DseError as e:
        data = read_resolved(path, "hardware")
        raise SpecError([issue_at(data, ("technology", "node"), str(e))]) from None


def check_file(path: Path) -> str:
    """Validate one file of any kind; returns its kind. Raises SpecError with every issue."""
    kind = detect_kind(path, read_yaml(path))
    checker = _CHECKERS.get(kind)
    if checker is None:
        raise SpecError([Issue(str(path), 1, 1, "", f"{kind} files are not supported by this "
                                                   "version of dse")])
    checker(path)
    return kind


def _check_study(path: Path) -> None:
    from dse.search.space import load_study

    load_study(path)


# What validates each kind of file `detect_kind` names.
_CHECKERS: dict[str, Callable[[Path], object]] = {
    "hardware": _check_design, "technology": load_technology, "workload": load_workload,
    "lengths": check_lengths_file, "study": _check_study,
}
