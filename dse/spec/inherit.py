"""`base:` inheritance of spec files: a file merged onto the chain of files it names as its base
(lists of named items matched by name, `remove: true` to drop one, keys describing one
file not inherited), with a chip's coupled fields (memory generation, partitions, slices)
kept consistent and its base's die facts and spares handled. Positions point at each
value's own file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard

from dse.errors import Issue, ReadError, SpecError
from dse.spec.fixed_costs import Spares
from dse.spec.hardware_costs import spares
from dse.spec.hardware_data import hardware_from_data
from dse.spec.library import resolve, shown_ref
from dse.spec.messages import issue_at
from dse.spec.positions import LDict, LList, without
from dse.spec.terms import COUPLED
from dse.spec.yamlpos import read_yaml
from dse.units import BYTES, UnitError, scale_quantity, to_kind

# Keys that describe one file and are never inherited through `base:`.
_NOT_INHERITED = ("name", "source", "description", "base")


# Marker a derived spec puts on an inherited list item (matched by name) to drop it.
_REMOVE_KEY = "remove"


# Most `base:` links followed from one file (docs: guide/commands.md, Input limits): the shipped
# specs use at most 2; `dse check` and every loader refuse a longer chain with the same error.
MAX_BASE_CHAIN = 16


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


def chain_of(path: Path, data: LDict, stack: tuple[Path, ...]) -> tuple[Path, ...]:
    """The files a `base:` chain has passed through, `path` (read as `data`) last; a file
    met twice is an inheritance cycle, reported at its `base:`."""
    here = path.resolve()
    if here in stack:
        chain = " -> ".join(p.name for p in (*stack, here))
        raise SpecError([issue_at(data, ("base",), f"inheritance cycle: {chain}")])
    return (*stack, here)


def check_chain_length(data: LDict, stack: tuple[Path, ...], base_ref: str) -> None:
    """Refuse to follow a `base:` beyond MAX_BASE_CHAIN links, at that `base:`."""
    if len(stack) <= MAX_BASE_CHAIN:
        return
    names = [p.name for p in stack] + [shown_ref(base_ref)]
    shown = names if len(names) <= 6 else [*names[:3], "…", *names[-3:]]
    raise SpecError([issue_at(data, ("base",), f"more than {MAX_BASE_CHAIN} levels of base: "
                                               f"inheritance ({' -> '.join(shown)}); the "
                                               f"limit is {MAX_BASE_CHAIN}")])


def read_base(base_path: Path, data: LDict) -> LDict:
    """Read the file `data`'s `base:` names; one that cannot be read as YAML text at all is
    named as the bad file, with the `base:` that referenced it."""
    try:
        return read_yaml(base_path, display=str(base_path))
    except ReadError as e:
        at = data.val_pos["base"]
        where = f"referenced by base: at {at.file}:{at.line}:{at.col}"
        raise ReadError([replace(i, message=f"{i.message} ({where})") for i in e.issues]
                        ) from None


def _resolved(path: Path, data: LDict, kind: str, stack: tuple[Path, ...]) -> LDict:
    """`data` (read from `path`) merged onto everything it inherits."""
    stack = chain_of(path, data, stack)
    if "name" not in data:
        data.put("name", path.stem, data.pos, data.pos)
    base_ref = data.get("base")
    if base_ref is None:
        return data
    if not isinstance(base_ref, str) or not base_ref:
        raise SpecError([issue_at(data, ("base",), "expected the name or path of a spec, "
                                                  f"found {base_ref!r}")])
    check_chain_length(data, stack, base_ref)
    try:
        base_path = resolve(base_ref, kind, near=path.parent)
    except SpecError as e:
        raise SpecError([issue_at(data, ("base",), e.issues[0].message)]) from None
    base = _resolved(base_path, read_base(base_path, data), kind, stack)
    spares = _base_spares(base, data) if kind == "hardware" else None
    base = without(base, _NOT_INHERITED)
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
    out = without(base, ())
    out.copy_entry(base, "technology", without(tech, dropped))
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
        out[i] = without(level, tuple(k for k in ("interface", "capacity", "bandwidth")
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
        copy = without(level, ())
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
