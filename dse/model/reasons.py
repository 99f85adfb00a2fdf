"""Why designs are infeasible, kept as data through the vectorized pipeline and worded only
for the designs someone reads (wording a reason costs ~7 us a design, most of a
large batch's time when many designs do not fit). Pure; no I/O.

A `Reasons` is an ordered list of clauses, each a [N] mask of the designs it holds for and a
function that words it for one design (reading the stage's arrays at that index). Design
i's text joins the words of the clauses that hold it with "; " ("" when none does). It
reads like the [N] object array of texts it stands for: `r[i]` is a str, `np.asarray(r)`
every text, `r == ""` compares the texts; building, combining and selecting formats
nothing.

Beside the words, a clause may carry a code (what kind of reason it is: MEMORY, NO_RATE ...)
and an amount per design (MEMORY: the bytes short), so that a caller that acts on a reason
-- the study's "closest design" -- reads `codes(code)` and `amount(code)`, never the words."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

Word = Callable[[int], str]

# The kinds of reason the pipeline gives (`Reasons.first(..., code=...)`).
MEMORY = "memory"
"""The design's memory cannot hold what it must; amount: the bytes short per chip."""
NO_RATE = "no_rate"
"""No compute rate for the scenario's precision."""
NO_LINK = "no_link"
"""Chips must communicate and the design has no chip-to-chip links."""
ENGINE_LIMIT = "engine_limit"
"""More sequences in flight than the serving engine allows."""
LATENCY_TARGET = "latency_target"
"""No batch meets the scenario's latency target."""
CODES = (MEMORY, NO_RATE, NO_LINK, ENGINE_LIMIT, LATENCY_TARGET)


def _worded(word: str | Word) -> Word:
    if callable(word):
        return word
    text = word

    def fixed(i: int) -> str:
        return text

    return fixed


def _renumbered(word: Word, index: np.ndarray) -> Word:
    """`word` of design index[j] for design j."""
    def at(j: int) -> str:
        return word(int(index[j]))

    return at


class Reasons:
    """[N] reasons a design is infeasible, worded on demand (see the module)."""

    __slots__ = ("_amounts", "_any", "_codes", "clauses", "n")
    __hash__ = None  # type: ignore[assignment]  # compares elementwise, like an array

    def __init__(self, n: int, clauses: Sequence[tuple[np.ndarray, Word]] = (),
                 codes: dict[str, np.ndarray] | None = None,
                 amounts: dict[str, np.ndarray] | None = None):
        self.n = int(n)
        self.clauses = tuple((np.broadcast_to(np.asarray(m, dtype=bool), (self.n,)), w)
                             for m, w in clauses)
        self._any: np.ndarray | None = None
        self._codes = dict(codes or {})  # code -> [N] bool: designs with a reason of it
        self._amounts = dict(amounts or {})  # code -> [N] float, NaN where it has none

    def _with(self, clauses: Sequence[tuple[np.ndarray, Word]],
              codes: dict[str, np.ndarray] | None = None,
              amounts: dict[str, np.ndarray] | None = None) -> Reasons:
        return Reasons(self.n, clauses, self._codes if codes is None else codes,
                       self._amounts if amounts is None else amounts)

    def _coded(self, mask: np.ndarray, code: str | None, amount: Any
               ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The codes and amounts with `code` added for the designs in `mask`."""
        codes, amounts = dict(self._codes), dict(self._amounts)
        if code is None:
            if amount is not None:
                raise ValueError("an amount goes with a code")
            return codes, amounts
        if code not in CODES:
            raise ValueError(f"unknown reason code {code!r}; expected one of {CODES}")
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), (self.n,))
        codes[code] = codes.get(code, np.zeros(self.n, dtype=bool)) | mask
        if amount is not None:
            value = np.broadcast_to(np.asarray(amount, dtype=float), (self.n,))
            amounts[code] = np.where(mask, value, amounts.get(code, np.full(self.n, np.nan)))
        return codes, amounts

    def codes(self, code: str) -> np.ndarray:
        """[N] bool: the designs that have a reason of kind `code`."""
        if code not in CODES:
            raise ValueError(f"unknown reason code {code!r}; expected one of {CODES}")
        return self._codes.get(code, np.zeros(self.n, dtype=bool)).copy()

    def amount(self, code: str) -> np.ndarray:
        """[N] float: the amount a reason of kind `code` gives (MEMORY: bytes short), NaN
        for the designs without one."""
        if code not in CODES:
            raise ValueError(f"unknown reason code {code!r}; expected one of {CODES}")
        return self._amounts.get(code, np.full(self.n, np.nan)).copy()

    def coded(self, mask: np.ndarray | bool, code: str, amount: Any = None) -> Reasons:
        """The same words, with the designs in `mask` marked as having a reason of kind
        `code` (for reasons worded elsewhere, Reasons.of)."""
        return self._with(self.clauses,
                          *self._coded(np.asarray(mask, dtype=bool), code, amount))

    @classmethod
    def none(cls, n: int) -> Reasons:
        """No reason for any of n designs."""
        return cls(n)

    @classmethod
    def of(cls, texts: np.ndarray | Sequence[str]) -> Reasons:
        """Texts already worded ("" for none), e.g. from a stage that words its own."""
        arr = np.asarray(texts, dtype=object)
        return cls(len(arr), [(arr != "", lambda i: str(arr[i]))])

    @property
    def any(self) -> np.ndarray:
        """[N] bool: designs with a reason."""
        if self._any is None:
            out = np.zeros(self.n, dtype=bool)
            for m, _ in self.clauses:
                out |= m
            self._any = out
        return self._any

    def first(self, mask: np.ndarray | bool, word: str | Word, code: str | None = None,
              amount: Any = None) -> Reasons:
        """A reason for the designs in `mask` that have none yet (the first check to fail
        names the design's problem), of kind `code` with `amount` ([N] or one value)."""
        held: np.ndarray = np.asarray(mask, dtype=bool) & ~self.any
        mask = held
        return self._with([*self.clauses, (mask, _worded(word))],
                          *self._coded(mask, code, amount))

    def also(self, mask: np.ndarray | bool, word: str | Word, code: str | None = None,
             amount: Any = None) -> Reasons:
        """One more reason for the designs in `mask`, after the ones they have."""
        mask = np.asarray(mask, dtype=bool)
        return self._with([*self.clauses, (mask, _worded(word))],
                          *self._coded(mask, code, amount))

    def prefixed(self, mask: np.ndarray, text: str) -> Reasons:
        """`text` put before the reason of the designs in `mask` (before "" where they have
        none)."""
        mask = np.asarray(mask, dtype=bool)
        return self._with([(mask, lambda i: text + self.text(i)),
                           (self.any & ~mask, self.text)])

    def only(self, keep: np.ndarray) -> Reasons:
        """The reasons of the designs in `keep`; none for the others."""
        keep = np.asarray(keep, dtype=bool)
        return self._with([(m & keep, w) for m, w in self.clauses],
                          {c: m & keep for c, m in self._codes.items()},
                          {c: np.where(keep, a, np.nan) for c, a in self._amounts.items()})

    def take(self, index: np.ndarray) -> Reasons:
        """The reasons of designs `index` (ints), in that order."""
        index = np.asarray(index, dtype=np.intp)
        return Reasons(len(index), [(m[index], _renumbered(w, index)) for m, w in self.clauses],
                       {c: m[index] for c, m in self._codes.items()},
                       {c: a[index] for c, a in self._amounts.items()})

    @classmethod
    def concatenate(cls, parts: Sequence[Reasons]) -> Reasons:
        """The designs of `parts`, one after another."""
        starts = np.cumsum([0, *(p.n for p in parts)])
        n = int(starts[-1])

        def word(i: int) -> str:
            k = int(np.searchsorted(starts, i, side="right")) - 1
            return parts[k].text(i - int(starts[k]))

        mask = np.concatenate([p.any for p in parts]) if parts else np.zeros(0, dtype=bool)
        kinds = {c for p in parts for c in p._codes}
        codes = {c: np.concatenate([p.codes(c) for p in parts]) for c in kinds}
        amounts = {c: np.concatenate([p.amount(c) for p in parts])
                   for c in {c for p in parts for c in p._amounts}}
        return cls(n, [(mask, word)], codes, amounts)

    def text(self, i: int) -> str:
        """Design i's reason, worded ("" when it has none)."""
        return "; ".join(w(i) for m, w in self.clauses if m[i])

    # --- read like an [N] object array of texts ----------------------------------------

    def __len__(self) -> int:
        return self.n

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int | np.integer):
            i = int(key)
            if not -self.n <= i < self.n:
                raise IndexError(f"index {i} is out of bounds for {self.n} designs")
            return self.text(i % self.n)
        return self.take(np.arange(self.n)[key])

    def __iter__(self) -> Iterator[str]:
        return (self.text(i) for i in range(self.n))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.full(self.n, "", dtype=object)
        for i in np.flatnonzero(self.any):
            out[i] = self.text(int(i))
        return out if dtype is None else out.astype(dtype)

    def tolist(self) -> list[str]:
        return np.asarray(self).tolist()

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def __eq__(self, other: object) -> Any:
        if isinstance(other, str) and other == "":
            return ~self.any
        return np.asarray(self) == (np.asarray(other) if isinstance(other, Reasons) else other)

    def __ne__(self, other: object) -> Any:
        return ~(self == other)

    def __reduce__(self) -> tuple[Any, ...]:
        # worded when pickled (to another process): the clauses' functions are closures
        return (_unpickled, (np.asarray(self), self._codes, self._amounts))

    def __repr__(self) -> str:
        return f"Reasons({self.n} designs, {int(self.any.sum())} with a reason)"


def _unpickled(texts: np.ndarray, codes: dict[str, np.ndarray],
               amounts: dict[str, np.ndarray]) -> Reasons:
    out = Reasons.of(texts)
    return Reasons(out.n, out.clauses, codes, amounts)
