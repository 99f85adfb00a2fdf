"""Sequence-length distributions of the inference (encoder) phase.

A harness that skips padding (MLPerf BERT on TensorRT, FasterTransformer's remove-padding,
any variable-length attention kernel) does the work of each sequence's real length, not of
the padded maximum. A scenario's `lengths:` gives the distribution of those lengths: the
name of a shipped one (`squad-v1.1`, in `workloads/lengths/`), a histogram (a list of
{length, share}) or its first two moments ({mean, second_moment} or {mean, std}). The
lowering needs only E[L] (token work) and E[L^2] (attention pairs): `moments()`.

The shipped files are read by dse.spec.load (the only YAML reader) against `ShippedFile`;
the model code only sees the moments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator, model_validator

from dse.spec.types import Spec

# A histogram's shares must sum to 1 within this (then they are normalised to sum to 1
# exactly): shares written to three decimals pass, a forgotten bin does not.
SHARE_TOLERANCE = 1e-3


class LengthBin(Spec):
    """One length of a histogram and the share of sequences that have it."""

    length: int = Field(gt=0)
    """Tokens of the sequence, as the model sees it (special tokens included)."""
    share: float = Field(gt=0, le=1)
    """Share of the sequences with this length (the shares sum to 1)."""


class LengthDistribution(Spec):
    """Lengths of the sequences an inference scenario runs, each at most its seq_in: a
    histogram, or the mean with the second moment (or the standard deviation)."""

    name: str | None = None
    """Set on the shipped distributions (`lengths: squad-v1.1`); inline ones have none."""
    source: str | None = None
    """Where a shipped distribution comes from."""
    histogram: list[LengthBin] | None = Field(default=None, min_length=1)
    """Lengths and their shares."""
    mean: float | None = Field(default=None, gt=0)
    """E[L], tokens."""
    second_moment: float | None = Field(default=None, gt=0)
    """E[L^2], tokens^2 (attention pairs per sequence per head)."""
    std: float | None = Field(default=None, ge=0)
    """Standard deviation of L, tokens (E[L^2] = mean^2 + std^2)."""

    @model_validator(mode="after")
    def _one_form(self) -> LengthDistribution:
        moments = [k for k in ("mean", "second_moment", "std") if getattr(self, k) is not None]
        if self.histogram is not None:
            if moments:
                raise ValueError(f"give a histogram or moments, not both (found histogram and "
                                 f"{', '.join(moments)})")
            seen: set[int] = set()
            for b in self.histogram:
                if b.length in seen:
                    raise ValueError(f"length {b.length} appears twice in the histogram")
                seen.add(b.length)
            total = math.fsum(b.share for b in self.histogram)
            if abs(total - 1.0) > SHARE_TOLERANCE:
                raise ValueError(f"histogram shares sum to {total:.6g}; expected 1 (within "
                                 f"{SHARE_TOLERANCE:g})")
            return self
        if self.mean is None:
            raise ValueError("expected a histogram (a list of {length, share}) or a mean with "
                             "second_moment or std")
        if (self.second_moment is None) == (self.std is None):
            raise ValueError("a mean needs exactly one of second_moment or std")
        if self.second_moment is not None and self.second_moment < self.mean ** 2 * (1 - 1e-12):
            raise ValueError(f"second_moment {self.second_moment:g} is below mean^2 = "
                             f"{self.mean ** 2:g}: no distribution has that (variance < 0)")
        return self

    def moments(self) -> tuple[float, float]:
        """(E[L], E[L^2]): tokens and squared tokens per sequence (a histogram's shares are
        normalised to sum to 1)."""
        if self.histogram is not None:
            total = math.fsum(b.share for b in self.histogram)
            return (math.fsum(b.share * b.length for b in self.histogram) / total,
                    math.fsum(b.share * b.length ** 2 for b in self.histogram) / total)
        assert self.mean is not None
        if self.second_moment is not None:
            return self.mean, self.second_moment
        assert self.std is not None
        return self.mean, self.mean ** 2 + self.std ** 2

    def fits(self, seq_in: int) -> str | None:
        """Why the distribution cannot be one of sequences of at most `seq_in` tokens (the
        scenario's longest), or None when it can. A histogram's lengths must not exceed it;
        moments must be those of some distribution on [1, seq_in]: E[L] <= seq_in and
        E[L^2] <= seq_in x E[L]."""
        what = f"lengths {self.name}" if self.name else "lengths"
        if self.histogram is not None:
            longest = max(b.length for b in self.histogram)
            if longest > seq_in:
                return (f"{what} reach {longest} tokens, above seq_in {seq_in} (the longest "
                        f"sequence); expected seq_in >= {longest}")
            return None
        mean, square = self.moments()
        if mean > seq_in or square > seq_in * mean * (1 + 1e-12):
            return (f"{what}: a mean of {mean:g} and a second moment of {square:g} need "
                    f"sequences longer than seq_in {seq_in} (lengths up to seq_in have mean <= "
                    f"seq_in and second moment <= seq_in x mean)")
        return None

    def describe(self) -> str:
        """Short text: `squad-v1.1 (mean 178.5)`, `histogram of 3 (mean 150)`, `mean 150,
        std 40`."""
        mean, square = self.moments()
        if self.name:
            return f"{self.name} (mean {mean:.4g})"
        if self.histogram is not None:
            return f"histogram of {len(self.histogram)} (mean {mean:.4g})"
        spread = f"std {self.std:.4g}" if self.std is not None else \
            f"second moment {square:.4g}"
        return f"mean {mean:.4g}, {spread}"


class ShippedFile(Spec):
    """A shipped distribution file: counts of sequences per length."""

    name: str = Field(min_length=1)
    """Name a scenario's `lengths:` gives (the file name without `.yaml`)."""
    source: str = Field(min_length=1)
    """Where the counts come from: the data set, the tokenizer and how it was windowed."""
    max_length: int = Field(gt=0)
    """The truncation length the distribution was built at."""
    features: int = Field(gt=0)
    """Sequences counted (the sum of the counts)."""
    counts: list[Annotated[list[int], Field(min_length=2, max_length=2)]] = Field(min_length=1)
    """[length, sequences of that length] pairs."""

    @field_validator("counts")
    @classmethod
    def _consistent(cls, counts: list[list[int]], info: ValidationInfo) -> list[list[int]]:
        """Checked at `counts` (its line in the file): after max_length and features, which
        are read first (a bad one is reported at its own key, and skips what needs it)."""
        top = info.data.get("max_length")
        if top is not None:
            for i, (n, c) in enumerate(counts):
                if not 0 < n <= top or c < 1:
                    raise ValueError(f"expected [length in 1..{top}, count >= 1] pairs, "
                                     f"found {[n, c]} (pair {i + 1})")
        seen: set[int] = set()
        for n, _ in counts:  # the histogram (from_file) takes each length once
            if n in seen:
                raise ValueError(f"length {n} appears twice")
            seen.add(n)
        total = sum(c for _, c in counts)
        features = info.data.get("features")
        if features is not None and total != features:
            raise ValueError(f"the counts sum to {total}, but features says {features}")
        return counts


# The shipped distributions by name. The spec loader (dse.spec.load, the only YAML reader)
# installs its reader of workloads/lengths/ here, so this module and the schemas using it
# stay free of I/O.
_library: Callable[[str], LengthDistribution] | None = None


def use_library(find: Callable[[str], LengthDistribution]) -> None:
    """Install the function that finds a shipped distribution by name (dse.spec.load)."""
    global _library
    _library = find


def named(name: str) -> LengthDistribution:
    """The shipped distribution `name`; ValueError (reported at the scenario's `lengths:`)
    when there is none."""
    if _library is None:  # pragma: no cover - dse.spec.load is imported with dse
        raise ValueError(f"no library of length distributions to find '{name}' in (import "
                         "dse.spec.load)")
    return _library(name)


def from_file(name: str, spec: ShippedFile) -> LengthDistribution:
    """A shipped file's counts as a histogram of shares."""
    return LengthDistribution(
        name=name, source=spec.source,
        histogram=[LengthBin(length=n, share=c / spec.features) for n, c in spec.counts])
