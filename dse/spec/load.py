"""The only YAML reader of dse: finds spec files by name or path, resolves `base:`
inheritance, validates against the schema and reports every problem at once.

Names resolve first beside the file that refers to them, then in the shipped library
(`hwspecs/`, `workloads/`, `studies/`), so `base: h100-sxm` works from anywhere and a
user's own designs can inherit from each other by name.
"""

from __future__ import annotations

import difflib
import errno
import functools
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from pydantic import BaseModel, ValidationError

from dse.errors import Issue, ReadError, SpecError
from dse.spec import catalogue, hardware, hardware_checks, lengths, technology, workload
from dse.spec.fixed_costs import Spares
from dse.spec.hardware_costs import spares
from dse.spec.messages import issue_at as issue_at  # re-exported: study files use it
from dse.spec.messages import issues_from, locate
from dse.spec.positions import LDict, LList
from dse.spec.types import CLOCK_CONTEXT_KEY, CLOCK_INVALID_KEY
from dse.spec.vocabulary import COUPLED
from dse.spec.yamlpos import read_yaml as read_yaml  # re-exported: study files use it
from dse.units import BYTES, FREQUENCY, UnitError, scale_quantity, to_kind

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
LIBRARY_FOLDERS = {"hardware": "hwspecs", "workload": "workloads", "study": "studies",
                   "validation": "validation", "technology": "hwspecs/tech",
                   "lengths": "workloads/lengths"}
# Keys that describe one file and are never inherited through `base:`.
_NOT_INHERITED = ("name", "source", "description", "base")
# Marker a derived spec puts on an inherited list item (matched by name) to drop it.
_REMOVE_KEY = "remove"
# Most `base:` links followed from one file (README, "Input limits"): the shipped specs use
# at most 2; `dse check` and every loader refuse a longer chain with the same error.
MAX_BASE_CHAIN = 16


def library_dir(kind: str) -> Path:
    """Folder of shipped specs of `kind`: inside the installed package (wheel), else the
    repository root (source checkout or editable install)."""
    folder = LIBRARY_FOLDERS[kind]
    packaged = _PACKAGE_DIR / "_data" / folder
    return packaged if packaged.is_dir() else _PACKAGE_DIR.parent / folder


def library_names(kind: str) -> list[str]:
    """Names of the shipped specs of `kind`, sorted."""
    folder = library_dir(kind)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def looks_like_path(ref: str) -> bool:
    """Whether a reference names a file (a path, or a .yaml name) rather than a library name."""
    return "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml"))


def _is_file(path: Path, ref: str) -> bool:
    """Whether `path` is a file (a regular file, or anything else that is not a folder:
    reading it says what is wrong); a name too long for the system is refused."""
    try:
        return path.exists() and not path.is_dir()
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            raise SpecError([Issue(_shown(ref), None, None, "", f"name too long ({len(ref)} "
                                   "characters; a file name has at most 255 bytes)")]
                            ) from None
        return True  # let reading the file say what is wrong (permission denied ...)


def _shown(ref: str, most: int = 60) -> str:
    """A name as an error shows it: cut in the middle when long."""
    return ref if len(ref) <= most else f"{ref[:most // 2]}…{ref[-(most // 2):]}"


def resolve(ref: str | Path, kind: str, near: Path | None = None) -> Path:
    """The file a name or path refers to. Raises DseError-style SpecError if none."""
    ref_s = str(ref)
    if isinstance(ref, Path) or looks_like_path(ref_s):
        path = Path(ref_s).expanduser()
        if near is not None and not path.is_absolute():
            path = near / path
        if not _is_file(path, ref_s):
            raise SpecError([Issue(_shown(ref_s), None, None, "", "file not found")])
        return path
    candidates = ([near / f"{ref_s}.yaml"] if near is not None else []) + [
        library_dir(kind) / f"{ref_s}.yaml"]
    for path in candidates:
        if _is_file(path, ref_s):
            return path
    names = library_names(kind)
    close = difflib.get_close_matches(ref_s, names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"shipped: {', '.join(names)}"
    raise SpecError([Issue(_shown(ref_s), None, None, "",
                           f"unknown {kind} '{_shown(ref_s)}' ({hint})")])


def _named(items: object) -> TypeGuard[LList]:
    return isinstance(items, LList) and all(
        isinstance(i, LDict) and isinstance(i.get("name"), str) for i in items)


def _merge_named(base: LList, over: LList, issues: list[Issue], path: str) -> LList:
    """Merge lists of named mappings. An item whose name is inherited overrides that item in
    place (`remove: true` drops it). A new item goes right before the next inherited item
    listed after it, or at the end (outermost) when none follows."""
    order: list[list[Any]] = [[item, pos] for item, pos in zip(base, base.item_pos,
                                                                strict=True)]

    def where(name: str) -> int | None:
        return next((i for i, (it, _) in enumerate(order) if it is not None
                     and it["name"] == name), None)

    pending: list[list[Any]] = []
    for j, (item, pos) in enumerate(zip(over, over.item_pos, strict=True)):
        i = where(item["name"])
        if i is None:
            if item.get(_REMOVE_KEY) is True:
                at = item.val_pos[_REMOVE_KEY]
                issues.append(Issue(at.file, at.line, at.col, f"{path}[{j}].{_REMOVE_KEY}",
                                    f"no inherited item named '{item['name']}' to remove"))
            else:
                pending.append([item, pos])
            continue
        order[i:i] = pending
        i += len(pending)
        pending = []
        if item.get(_REMOVE_KEY) is True:
            order[i] = [None, None]
        else:
            order[i] = [_merge(order[i][0], item, issues, f"{path}[{j}]"), pos]
    order.extend(pending)
    out = LList(over.pos)
    for item, pos in order:
        if item is not None:
            out.add(item, pos)
    return out


# Keys of a mapping that state one thing in alternative ways (a skew as a Zipf exponent or
# as a measured curve): giving one in a derived file replaces the base's, and the base's
# `source` with it (it described the base's figures).
_ALTERNATIVES = (frozenset({"alpha", "curve"}),)


def _replaced(base: LDict, over: LDict) -> set[str]:
    """Keys of `base` that `over` replaces by giving one of their alternatives."""
    gone: set[str] = set()
    for group in _ALTERNATIVES:
        given = group & set(over)
        if given and (group - given) & set(base):
            gone |= (group - given) | ({"source"} - set(over))
    return gone


def _reordered(d: LDict, keys: list[str]) -> LDict:
    """`d` with its entries (and their positions) in the order of `keys`."""
    out = LDict(d.pos)
    for key in keys:
        out.copy_entry(d, key)
    return out


def _merge(base: Any, over: Any, issues: list[Issue], path: str = "") -> Any:
    """Deep merge of `over` onto `base`: mappings merge key by key (a key's alternative,
    `_ALTERNATIVES`, replaces it), lists of named mappings merge by name, anything else is
    replaced."""
    if isinstance(base, LDict) and isinstance(over, LDict):
        out = LDict(over.pos)
        gone = _replaced(base, over)
        # A derived workload's own scenarios come first, so its first one is the default, as
        # in any workload file; elsewhere inherited keys keep their place.
        own_first = path == "scenarios"
        for key in base:
            if key not in gone:
                out.copy_entry(base, key)
        for key in over:
            sub = f"{path}.{key}" if path else key
            value = _merge(base[key], over[key], issues, sub) if key in base else over[key]
            out.copy_entry(over, key, value)
        if own_first:
            out = _reordered(out, [*over, *(k for k in out if k not in over)])
        return out
    if _named(base) and _named(over):
        return _merge_named(base, over, issues, path)
    return over


def read_resolved(path: Path, kind: str) -> LDict:
    """Read `path` and everything it inherits, merged; positions point at each value's file.
    Values shared through YAML aliases are never modified: merging builds new mappings."""
    return _resolved(path, read_yaml(path, display=str(path)), kind, ())


def _chain(path: Path, data: LDict, stack: tuple[Path, ...]) -> tuple[Path, ...]:
    """The files a `base:` chain has passed through, `path` (read as `data`) last; a file
    met twice is an inheritance cycle, reported at its `base:`."""
    here = path.resolve()
    if here in stack:
        chain = " -> ".join(p.name for p in (*stack, here))
        raise SpecError([issue_at(data, ("base",), f"inheritance cycle: {chain}")])
    return (*stack, here)


def _check_chain_length(data: LDict, stack: tuple[Path, ...], base_ref: str) -> None:
    """Refuse to follow a `base:` beyond MAX_BASE_CHAIN links, at that `base:`."""
    if len(stack) <= MAX_BASE_CHAIN:
        return
    names = [p.name for p in stack] + [_shown(base_ref)]
    shown = names if len(names) <= 6 else [*names[:3], "…", *names[-3:]]
    raise SpecError([issue_at(data, ("base",), f"more than {MAX_BASE_CHAIN} levels of base: "
                                               f"inheritance ({' -> '.join(shown)}); the "
                                               f"limit is {MAX_BASE_CHAIN}")])


def _read_base(base_path: Path, data: LDict) -> LDict:
    """Read the file `data`'s `base:` names; one that cannot be read as YAML text at all is
    named as the bad file, with the `base:` that referenced it."""
    try:
        return read_yaml(base_path, display=str(base_path))
    except ReadError as e:
        at = data.val_pos["base"]
        where = f"referenced by base: at {at.file}:{at.line}:{at.col}"
        raise ReadError([replace(i, message=f"{i.message} ({where})") for i in e.issues]
                        ) from None


def _without(data: LDict, keys: tuple[str, ...]) -> LDict:
    """A new mapping: `data` less `keys`, with the same positions (`data` is unchanged)."""
    out = LDict(data.pos)
    for key in data:
        if key not in keys:
            out.copy_entry(data, key)
    return out


def _resolved(path: Path, data: LDict, kind: str, stack: tuple[Path, ...]) -> LDict:
    """`data` (read from `path`) merged onto everything it inherits."""
    stack = _chain(path, data, stack)
    if "name" not in data:
        data.put("name", path.stem, data.pos, data.pos)
    base_ref = data.get("base")
    if base_ref is None:
        return data
    if not isinstance(base_ref, str) or not base_ref:
        raise SpecError([issue_at(data, ("base",), "expected the name or path of a spec, "
                                                  f"found {base_ref!r}")])
    _check_chain_length(data, stack, base_ref)
    try:
        base_path = resolve(base_ref, kind, near=path.parent)
    except SpecError as e:
        raise SpecError([issue_at(data, ("base",), e.issues[0].message)]) from None
    base = _resolved(base_path, _read_base(base_path, data), kind, stack)
    spares = _base_spares(base, data) if kind == "hardware" else None
    base = _without(base, _NOT_INHERITED)
    if kind == "hardware":
        base = _drop_die_facts(base, data)
    issues: list[Issue] = []
    merged = _merge(base, data, issues)
    if issues:
        raise SpecError(issues)
    if kind == "hardware":
        _couple(base, data, merged)
        merged.base_spares = spares
    return merged


def _base_spares(base: LDict, data: LDict) -> Spares | None:
    """The spares a derived design keeps from its base (dse.spec.hardware_costs.spares): the
    base's spare fractions, unless the design states its own `technology.as_built` or is
    the base's silicon (`same_die: true`, which inherits the as-built counts themselves).
    `base` is the base's merged data; a base that is not a valid design alone leaves none."""
    own = data.get("technology")
    if isinstance(own, LDict) and (own.get("same_die") is True or "as_built" in own):
        return None
    tech = base.get("technology")
    if not (isinstance(tech, LDict) and "as_built" in tech):
        return getattr(base, "base_spares", None)
    try:
        return spares(hardware_from_data(base))
    except SpecError:
        return None


# Published facts of a die that a derived design inherits only when it is the same silicon
# (`technology.same_die: true`).
_DIE_FACTS = ("die_area", "transistors", "as_built")


def _drop_die_facts(base: LDict, data: LDict) -> LDict:
    """A derived design is a new die unless it says `technology.same_die: true`: it does not
    inherit its base's published area, transistor count or as-built spares. Returns a new
    mapping (`base` is unchanged)."""
    tech = base.get("technology")
    if not isinstance(tech, LDict):
        return base
    own = data.get("technology")
    same = isinstance(own, LDict) and own.get("same_die") is True
    dropped = ("same_die",) if same else ("same_die", *_DIE_FACTS)
    out = _without(base, ())
    out.copy_entry(base, "technology", _without(tech, dropped))
    return out


def _couple(base: LDict, data: LDict, merged: LDict) -> None:
    """Coupled quantities (dse.spec.vocabulary.COUPLED) on the YAML route: a derived level
    that changes its HBM stacks or DRAM channels and not its capacity or bandwidth scales
    them per stack (channel) from the inherited values; a sliced cache likewise follows a new
    capacity or, with `slices_per: stack`, new stacks. It writes only into levels both
    files name, which `_merge` has just built, or into copies (never into values read from
    a file)."""
    mine, inherited, out = data.get("memory"), base.get("memory"), merged.get("memory")
    if not (_named(mine) and _named(inherited) and _named(out)):
        return
    by_name = {item["name"]: item for item in inherited}
    result = {item["name"]: item for item in out}
    for item in mine:
        old, new = by_name.get(item["name"]), result.get(item["name"])
        if old is None or new is None:
            continue
        for cause, effects in COUPLED.items():
            was, now = old.get(cause), item.get(cause)
            if not (isinstance(was, int) and isinstance(now, int) and was > 0 and now > 0):
                continue
            for effect in effects:
                if effect not in item and isinstance(old.get(effect), str):
                    scaled = scale_quantity(old[effect], now / was)
                    new.put(effect, scaled, item.key_pos[cause], item.val_pos[cause])
        _couple_slices(old, item, new)
    _couple_generation(by_name, mine, out)
    _couple_partitions(by_name, mine, out)


def _couple_generation(inherited: dict[str, LDict], mine: LList, out: LList) -> None:
    """A derived level that names a new `generation:` re-derives what the generation implies
    (interface, capacity, bandwidth: `_with_generations`) unless the derived file states
    them: the inherited values were the old generation's. The merged mapping is replaced
    by a copy, never written into."""
    named = {m["name"]: m for m in mine if isinstance(m, LDict)}
    for i, level in enumerate(out):
        own = named.get(level.get("name"))
        old = inherited.get(level.get("name"))
        if own is None or old is None or "generation" not in own \
                or own.get("generation") == old.get("generation"):
            continue
        out[i] = _without(level, tuple(k for k in ("interface", "capacity", "bandwidth")
                                       if k not in own))


def _couple_partitions(inherited: dict[str, LDict], mine: LList, out: LList) -> None:
    """A derived file that changes its HBM stacks scales the slices of an inherited cache
    with `slices_per: stack` in proportion (whole slices, at least one), and its capacity
    and bandwidth with them, unless it names that cache's capacity, slices or bandwidth
    (the rule of dse.model.memory_levels._slice_scale, on the YAML route). The cache's merged
    mapping is replaced by a copy, never written into."""
    changed = [(item, inherited[item["name"]]) for item in mine
               if item["name"] in inherited and isinstance(item.get("stacks"), int)
               and isinstance(inherited[item["name"]].get("stacks"), int)
               and inherited[item["name"]]["stacks"] > 0 and item["stacks"] > 0]
    if len(changed) != 1:
        return
    item, old = changed[0]
    ratio = item["stacks"] / old["stacks"]
    named = {m["name"]: m for m in mine}
    for i, level in enumerate(out):
        was = level.get("slices")
        own = named.get(level["name"], {})
        if level.get("slices_per") != "stack" or not (isinstance(was, int) and was > 0) \
                or any(k in own for k in ("capacity", "slices", "bandwidth")):
            continue
        count = max(1, round(was * ratio))
        copy = _without(level, ())
        at = (item.key_pos["stacks"], item.val_pos["stacks"])
        copy.put("slices", count, *at)
        for key in ("capacity", "bandwidth"):
            if isinstance(level.get(key), str):
                copy.put(key, scale_quantity(level[key], count / was), *at)
        out[i] = copy


def _couple_slices(old: LDict, item: LDict, new: LDict) -> None:
    """A derived sliced cache that changes its capacity and not its slices or bandwidth
    keeps the inherited slice size: its slice count is the new capacity over it (whole
    slices, at least one), and its bandwidth follows the slices (the rule of
    dse.model.memory_levels._slice_scale, on the YAML route)."""
    was = old.get("slices")
    if not (isinstance(was, int) and was > 0 and "capacity" in item and "slices" not in item
            and "bandwidth" not in item and isinstance(old.get("bandwidth"), str)):
        return
    try:
        ratio = to_kind(item["capacity"], BYTES) / to_kind(old["capacity"], BYTES)
    except (UnitError, TypeError, ZeroDivisionError):
        return  # the schema reports the bad capacity
    if not ratio > 0 or ratio == float("inf"):
        return
    count = max(1, round(was * ratio))
    at = (item.key_pos["capacity"], item.val_pos["capacity"])
    new.put("slices", count, *at)
    new.put("bandwidth", scale_quantity(old["bandwidth"], count / was), *at)


def validate(schema: type[BaseModel], data: LDict, context: dict[str, Any] | None = None
             ) -> BaseModel:
    """Validate positioned data against a schema; every error becomes one Issue."""
    try:
        return schema.model_validate(data, context=context or {})
    except ValidationError as e:
        raise SpecError(issues_from(e, schema, data)) from None


def _clock_context(data: LDict) -> dict[str, Any]:
    compute = data.get("compute")
    clock = compute.get("clock") if isinstance(compute, dict) else None
    try:
        return {CLOCK_CONTEXT_KEY: to_kind(clock, FREQUENCY)} if clock is not None else {}
    except UnitError:
        return {CLOCK_INVALID_KEY: True}  # the clock field itself reports the problem


def _with_generations(data: LDict) -> LDict:
    """`data` with what each level's `generation:` implies written in where the file does
    not state it (README, "Memory generations"): the interface, and capacity and bandwidth
    as units x the catalogue's figures per unit (units: `stacks` or `channels`; one link for
    CXL). A file's own numbers win. Unknown generations and a stated interface that
    contradicts the generation are reported at their keys. Returns a new mapping where
    anything is written (`data` is unchanged)."""
    levels = data.get("memory")
    if not isinstance(levels, list) or not any(
            isinstance(m, dict) and "generation" in m for m in levels):
        return data
    cat = catalogue.catalogue()
    issues: list[Issue] = []
    out_levels = LList(levels.pos if isinstance(levels, LList) else data.pos)
    for i, level in enumerate(levels):
        pos = levels.item_pos[i] if isinstance(levels, LList) and i < len(levels.item_pos) \
            else data.pos
        name = level.get("generation") if isinstance(level, LDict) else None
        if name is None or not isinstance(level, LDict) or level.get("kind") != "dram":
            # (the schema says a generation is for dram levels)
            out_levels.add(level, pos)
            continue
        if not isinstance(name, str) or name not in cat.generations:
            issues.append(issue_at(data, ("memory", i, "generation"), cat.unknown(name)))
            out_levels.add(level, pos)
            continue
        gen = cat.generations[name]
        iface = level.get("interface")
        if iface is not None and iface != gen.interface:
            issues.append(issue_at(data, ("memory", i, "interface"),
                                   f"interface {iface} contradicts generation {name} "
                                   f"({gen.interface}); give one or make them agree"))
        count = level.get("stacks" if gen.unit == "stack" else "channels", 1)
        count = count if isinstance(count, int) and not isinstance(count, bool) \
            and count > 0 else 1
        new = _without(level, ())
        at = (level.key_pos["generation"], level.val_pos["generation"])
        if iface is None:
            new.put("interface", gen.interface, *at)
        if "capacity" not in level:
            new.put("capacity", f"{count * gen.capacity / 2**30:.12g} GiB", *at)
        if "bandwidth" not in level:
            new.put("bandwidth", f"{count * gen.bandwidth / 1e9:.12g} GB/s", *at)
        out_levels.add(new, pos)
    if issues:
        raise SpecError(issues)
    out = _without(data, ())
    out.copy_entry(data, "memory", out_levels)
    return out


def hardware_from_data(data: LDict) -> hardware.HardwareSpec:
    """Validate merged hardware data, including the checks that span memory levels."""
    base_spares = getattr(data, "base_spares", None)  # kept by the loader on the mapping
    data = _with_generations(data)  # a new mapping: the attribute stays on the old one
    spec = validate(hardware.HardwareSpec, data, _clock_context(data))
    assert isinstance(spec, hardware.HardwareSpec)
    spec._base_spares = base_spares
    issues = [issue_at(data, loc, msg) for loc, msg in hardware_checks.hierarchy_issues(spec)]
    for built_loc, enabled_loc, msg in hardware_checks.as_built_issues(spec):
        # Report at the value the top-level file sets (its own line), the as-built one first.
        at = built_loc
        if locate(data, built_loc)[0].file != data.pos.file \
                and locate(data, enabled_loc)[0].file == data.pos.file:
            at = enabled_loc
        issues.append(issue_at(data, at, msg))
    if issues:
        raise SpecError(issues)
    return spec


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
    if not any(_is_file(folder / f"{node}.yaml", node)
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
    base = data.get("base")
    if isinstance(base, str) and base:
        stack = _chain(path, data, _stack)
        _check_chain_length(data, stack, base)
        for kind in ("hardware", "workload"):
            try:
                base_path = resolve(base, kind, near=path.parent)
            except SpecError:
                continue
            return detect_kind(base_path, _read_base(base_path, data), stack)
    return "hardware"
