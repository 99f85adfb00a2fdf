"""The only YAML reader of dse: finds spec files by name or path (dse.spec.library),
resolves `base:` inheritance (dse.spec.inherit), validates against the schema and reports
every problem at once.

Names resolve first beside the file that refers to them, then in the shipped library
(`hwspecs/`, `workloads/`, `studies/`), so `base: h100-sxm` works from anywhere and a
user's own designs can inherit from each other by name.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from dse.errors import SpecError
from dse.spec import catalogue, hardware, lengths, technology, workload
from dse.spec.hardware_data import hardware_from_data
from dse.spec.inherit import MAX_BASE_CHAIN as MAX_BASE_CHAIN  # re-exported: tests use it
from dse.spec.inherit import chain_of, check_chain_length, read_base
from dse.spec.inherit import read_resolved as read_resolved  # re-exported: tests use it
from dse.spec.library import LIBRARY_FOLDERS as LIBRARY_FOLDERS  # re-exported: tests use it
from dse.spec.library import is_spec_file, resolve
from dse.spec.library import library_dir as library_dir  # re-exported: tests use it
from dse.spec.library import library_names as library_names  # re-exported: tests use it
from dse.spec.messages import issue_at as issue_at  # re-exported: study files use it
from dse.spec.messages import validate as validate  # re-exported: study files use it
from dse.spec.positions import LDict
from dse.spec.stack_files import load_stack as load_stack  # installs the stack library
from dse.spec.yamlpos import read_yaml as read_yaml  # re-exported: study files use it


def _read_hardware(ref: str | Path) -> tuple[Path, LDict, hardware.HardwareSpec]:
    """The file `ref` names, its merged data (for positioned errors) and the spec."""
    path = resolve(ref, "hardware")
    data = read_resolved(path, "hardware")
    return path, data, hardware_from_data(data)


def load_hardware(ref: str | Path) -> hardware.HardwareSpec:
    """Load a hardware spec by shipped name ("h100-sxm") or path, with inheritance."""
    return _read_hardware(ref)[2]


def load_technology(ref: str | Path, near: Path | None = None) -> technology.TechSpec:
    """Load a process-node file by node name ("n7": `tech/n7.yaml` beside `near`, else the
    shipped `hwspecs/tech/`) or by path."""
    near_tech = near / "tech" if near is not None else None
    path = resolve(ref, "technology", near=near_tech)
    spec = validate(technology.TechSpec, read_yaml(path, display=str(path)))
    assert isinstance(spec, technology.TechSpec)
    if spec.market is None:
        object.__setattr__(spec, "market", shipped_market())
    return spec


T = TypeVar("T", bound=BaseModel)


def _shipped_data(model: type[T], name: str) -> T:
    """A data file shipped in dse/data/, validated as `model`."""
    path = Path(__file__).resolve().parent.parent / "data" / name
    out = validate(model, read_yaml(path, display=f"dse/data/{name}"))
    assert isinstance(out, model)
    return out


@functools.cache
def shipped_memory() -> catalogue.MemoryCatalogue:
    """The memory catalogue shipped with dse (dse/data/memory.yaml)."""
    return _shipped_data(catalogue.MemoryCatalogue, "memory.yaml")


catalogue.register(shipped_memory)


@functools.cache
def shipped_market() -> technology.Market:
    """The memory and packaging prices shipped with dse (dse/data/cost.yaml)."""
    return _shipped_data(technology.Market, "cost.yaml")


def _node_of(spec: hardware.HardwareSpec, data: LDict, path: Path) -> technology.TechSpec:
    """The node file `technology.node` names; a missing one is reported at that key."""
    assert spec.technology is not None
    try:
        return load_technology(spec.technology.node, near=path.parent)
    except SpecError as e:
        issue = e.issues[0]
        if issue.line is None:  # the node file was not found: point at the reference
            raise SpecError([issue_at(data, ("technology", "node"),
                                      issue.message.replace("technology", "process node"))]
                            ) from None
        raise


def hardware_with_technology(ref: str | Path) -> tuple[hardware.HardwareSpec,
                                                       technology.TechSpec]:
    """A hardware spec and the process-node constants its `technology.node` names. The node
    file is looked for in a `tech/` folder beside the spec, then in the shipped library."""
    path, data, spec = _read_hardware(ref)
    if spec.technology is None:
        raise SpecError([issue_at(data, (), "the area and power models need technology.node "
                                            "(a process node such as n7)")])
    return spec, _node_of(spec, data, path)


def load_design(ref: str | Path) -> tuple[hardware.HardwareSpec, technology.TechSpec | None,
                                         str | None]:
    """A hardware spec with the process-node constants its area and power need, or None
    and the reason they cannot be had (no technology.node, no node file, no compute.style).
    Errors in the spec or in a node file it names still raise."""
    path, data, spec = _read_hardware(ref)
    if spec.technology is None:
        return spec, None, "the spec gives no technology.node"
    if spec.compute.style is None:
        return spec, None, "the spec gives no compute.style (gpu or array)"
    node = spec.technology.node
    if not any(is_spec_file(folder / f"{node}.yaml", node)
               for folder in (path.parent / "tech", library_dir("technology"))):
        return spec, None, (f"no process-node file '{node}' (shipped: "
                            f"{', '.join(library_names('technology'))})")
    return spec, _node_of(spec, data, path), None


@functools.cache
def check_lengths_file(path: Path) -> lengths.LengthDistribution:
    """A length distribution file validated on its own (`dse check`)."""
    spec = validate(lengths.ShippedFile, read_yaml(path, display=str(path)))
    assert isinstance(spec, lengths.ShippedFile)
    return lengths.from_file(path.stem, spec)


def load_lengths(name: str) -> lengths.LengthDistribution:
    """A shipped length distribution by name (`workloads/lengths/NAME.yaml`). An unknown
    name raises ValueError (a scenario reports it at its `lengths:`); a broken file raises
    SpecError at its own line."""
    known = library_names("lengths")
    if name not in known:
        raise ValueError(f"unknown length distribution '{name}'; expected one of: "
                         f"{', '.join(known) or '(none shipped)'}, a histogram or a mean "
                         "with second_moment or std")
    return check_lengths_file(library_dir("lengths") / f"{name}.yaml")


lengths.use_library(load_lengths)


def load_workload(ref: str | Path) -> workload.WorkloadSpec:
    """Load a workload by shipped name ("llama2-7b"), path, or `gemm:MxNxK`."""
    if isinstance(ref, str) and workload.is_gemm_name(ref):
        return workload.gemm_from_name(ref)
    data = read_resolved(resolve(ref, "workload"), "workload")
    kind = data.get("kind")
    schemas = workload.WORKLOAD_SCHEMAS
    schema = schemas.get(kind) if isinstance(kind, str) else None
    if schema is None:
        loc = ("kind",) if "kind" in data else ()
        raise SpecError([issue_at(data, loc, f"expected a workload kind "
                                             f"({', '.join(schemas)}), found {kind!r}")])
    return validate(schema, data)  # type: ignore[return-value]


def detect_kind(path: Path, data: LDict, _stack: tuple[Path, ...] = ()) -> str:
    """What a spec file describes: hardware, workload or study, from its top-level keys or,
    for a file that only overrides a `base:`, from what the base describes. A cycle or a
    chain beyond MAX_BASE_CHAIN is refused as `read_resolved` refuses it."""
    if "kind" in data or "architecture" in data or "scenarios" in data:
        return "workload"
    if "objectives" in data or "parameters" in data:
        return "study"
    if "phy" in data or "energy" in data:
        return "technology"
    if "counts" in data and "max_length" in data:
        return "lengths"
    if "gemm" in data and "compute" not in data:
        return "stack"
    base = data.get("base")
    if isinstance(base, str) and base:
        stack = chain_of(path, data, _stack)
        check_chain_length(data, stack, base)
        for kind in ("hardware", "workload"):
            try:
                base_path = resolve(base, kind, near=path.parent)
            except SpecError:
                continue
            return detect_kind(base_path, read_base(base_path, data), stack)
    return "hardware"
