"""Why designs are infeasible, kept as data through the vectorized pipeline and worded only
for the designs someone reads (issue 26: wording a reason costs ~7 us a design, most of a
large batch's time when many designs do not fit). Pure; no I/O.

A `Reasons` is an ordered list of clauses, each a [N] mask of the designs it holds for and a
function that words it for one design (reading the stage's arrays at that index). Design
i's text joins the words of the clauses that hold it with "; " ("" when none does). It
reads like the [N] object array of texts it stands for: `r[i]` is a str, `np.asarray(r)`
every text, `r == ""` compares the texts; building, combining and selecting formats
nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

Word = Callable[[int], str]


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

    __slots__ = ("_any", "clauses", "n")
    __hash__ = None  # type: ignore[assignment]  # compares elementwise, like an array

    def __init__(self, n: int, clauses: Sequence[tuple[np.ndarray, Word]] = ()):
        self.n = int(n)
        self.clauses = tuple((np.broadcast_to(np.asarray(m, dtype=bool), (self.n,)), w)
                             for m, w in clauses)
        self._any: np.ndarray | None = None

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

    def first(self, mask: np.ndarray | bool, word: str | Word) -> Reasons:
        """A reason for the designs in `mask` that have none yet (the first check to fail
        names the design's problem)."""
        return Reasons(self.n, [*self.clauses, (np.asarray(mask, dtype=bool) & ~self.any,
                                                _worded(word))])

    def also(self, mask: np.ndarray | bool, word: str | Word) -> Reasons:
        """One more reason for the designs in `mask`, after the ones they have."""
        return Reasons(self.n, [*self.clauses, (np.asarray(mask, dtype=bool), _worded(word))])

    def prefixed(self, mask: np.ndarray, text: str) -> Reasons:
        """`text` put before the reason of the designs in `mask` (before "" where they have
        none)."""
        mask = np.asarray(mask, dtype=bool)
        return Reasons(self.n, [(mask, lambda i: text + self.text(i)),
                                (self.any & ~mask, self.text)])

    def only(self, keep: np.ndarray) -> Reasons:
        """The reasons of the designs in `keep`; none for the others."""
        keep = np.asarray(keep, dtype=bool)
        return Reasons(self.n, [(m & keep, w) for m, w in self.clauses])

    def take(self, index: np.ndarray) -> Reasons:
        """The reasons of designs `index` (ints), in that order."""
        index = np.asarray(index, dtype=np.intp)
        return Reasons(len(index), [(m[index], _renumbered(w, index)) for m, w in self.clauses])

    @classmethod
    def concatenate(cls, parts: Sequence[Reasons]) -> Reasons:
        """The designs of `parts`, one after another."""
        starts = np.cumsum([0, *(p.n for p in parts)])
        n = int(starts[-1])

        def word(i: int) -> str:
            k = int(np.searchsorted(starts, i, side="right")) - 1
            return parts[k].text(i - int(starts[k]))

        mask = np.concatenate([p.any for p in parts]) if parts else np.zeros(0, dtype=bool)
        return cls(n, [(mask, word)])

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
        return (Reasons.of, (np.asarray(self),))

    def __repr__(self) -> str:
        return f"Reasons({self.n} designs, {int(self.any.sum())} with a reason)"
