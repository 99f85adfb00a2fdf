"""Every term of the design vocabulary (derived from the hardware schema) is read by
design_batch, is one value for all designs (a package or as-built assumption), or is listed
in dse.model.overrides.UNREAD_TERMS with its reason: a field added to the schema is never
silently ignored by --set, the API or a study."""

from __future__ import annotations

import pytest

from dse.errors import DseError
from dse.model.batch import design_batch
from dse.model.overrides import UNREAD, UNREAD_TERMS
from dse.spec import assumptions
from dse.spec.catalogue import catalogue
from dse.spec.hardware import HardwareSpec, interface_family
from dse.spec.load import library_names, load_hardware
from dse.spec.vocabulary import Term, _matches, current, terms, variable_paths

CHIPS = [load_hardware(n) for n in library_names("hardware")]


def _value(spec: HardwareSpec, path: str, term: Term) -> object | None:
    """A value the path may take on `spec`: its own, else one within the term's rule (a
    generation of the level's family)."""
    if term.categorical:
        level = next(lv for lv in spec.memory if path.startswith(f"memory.{lv.name}."))
        if level.interface is None:
            return None
        family = interface_family(level.interface) or level.interface
        return next((g for g in catalogue().names if catalogue().family_of(g) == family),
                    None)
    own = current(spec, path)
    if own is not None:
        return own
    if term.le is not None and term.le <= 1:
        return 0.5
    return 2 if term.integer else 1.0


def _status(pattern: str, term: Term) -> str:
    """read, unread, fixed (one value for all designs), or what went wrong."""
    for spec in CHIPS:
        names = [lv.name for lv in spec.memory]
        for path in (p for p in variable_paths(spec) if _matches(pattern, p, names)):
            value = _value(spec, path, term)
            if value is None:
                continue
            try:
                design_batch(spec, {path: value})
                return "read"
            except DseError as e:
                if e.rule == UNREAD:
                    return "unread"
                if assumptions.NOT_VARIED in str(e):
                    return "fixed"
    return "no shipped chip lets it be tried"


@pytest.mark.parametrize("pattern", list(terms()))
def test_every_term_is_read_or_listed_with_its_reason(pattern: str) -> None:
    status = _status(pattern, terms()[pattern])
    if pattern in UNREAD_TERMS:
        assert status == "unread", f"{pattern} is read now: remove it from UNREAD_TERMS"
    else:
        assert status in ("read", "fixed"), (
            f"{pattern}: {status}; read it in dse.model.batch.design_batch or list it in "
            "dse.model.overrides.UNREAD_TERMS with why")


def test_an_unread_field_names_why() -> None:
    with pytest.raises(DseError, match=r"no model reads this field \(the roofline times each "
                                       r"operator by bandwidth"):
        design_batch(load_hardware("h100-sxm"), {"memory.HBM3.latency": "100 ns"})


def test_a_precision_the_file_leaves_out_can_be_given_an_energy() -> None:
    h100 = load_hardware("h100-sxm")
    assert "fp4" not in (h100.power.matrix_energy if h100.power else {})
    db = design_batch(h100, {"power.matrix_energy.fp4": "0.1 pJ/FLOP"})
    assert db.matrix_energy["fp4"][0] == pytest.approx(0.1e-12)
