"""Interval algebra on sorted, disjoint integer intervals (half-open ``[start, end)``), in numpy.

An :class:`Intervals` value is the normal form every analysis works with: starts ascending, no overlaps,
no empty pieces. Everything is vectorised so that a trace with millions of events stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Intervals:
    """A set of time on one axis, as disjoint sorted half-open intervals (integer nanoseconds)."""

    starts: np.ndarray
    ends: np.ndarray

    @staticmethod
    def empty() -> "Intervals":
        z = np.zeros(0, dtype=np.int64)
        return Intervals(z, z)

    @staticmethod
    def of(starts: np.ndarray | list[int], ends: np.ndarray | list[int]) -> "Intervals":
        """Normalise arbitrary (possibly overlapping, unsorted) intervals into a disjoint union."""
        return union(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def total(self) -> int:
        """Total covered length."""
        return int((self.ends - self.starts).sum())

    def __or__(self, other: "Intervals") -> "Intervals":
        return union(
            np.concatenate([self.starts, other.starts]), np.concatenate([self.ends, other.ends])
        )

    def __and__(self, other: "Intervals") -> "Intervals":
        return _combine(self, other, keep="both")

    def __sub__(self, other: "Intervals") -> "Intervals":
        return _combine(self, other, keep="left_only")

    def clip(self, lo: int, hi: int) -> "Intervals":
        return self & Intervals(np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))

    def covered_in(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Covered length inside each window ``[lo[i], hi[i])`` (vectorised over windows)."""
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.asarray(hi, dtype=np.int64)
        return np.maximum(self._measure_upto(hi) - self._measure_upto(lo), 0)

    def _measure_upto(self, x: np.ndarray) -> np.ndarray:
        """Length of the set inside ``(-inf, x)`` for every x."""
        if self.starts.size == 0:
            return np.zeros(x.shape, dtype=np.int64)
        lengths = self.ends - self.starts
        before = np.concatenate([[0], np.cumsum(lengths)])  # before[i]: length of pieces 0..i-1
        idx = (
            np.searchsorted(self.starts, x, side="right") - 1
        )  # last piece starting at or before x
        safe = np.clip(idx, 0, None)
        partial = np.minimum(x, self.ends[safe]) - self.starts[safe]
        return np.where(idx >= 0, before[safe] + partial, 0)


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Disjoint union of arbitrary intervals; empty and inverted pieces are dropped."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return Intervals.empty()
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # A piece opens a new group when it starts after everything before it has ended.
    new_group = np.empty(s.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > reach[:-1]
    group_starts = s[new_group]
    last_of_group = np.append(np.flatnonzero(new_group)[1:] - 1, s.size - 1)
    return Intervals(group_starts.astype(np.int64), reach[last_of_group].astype(np.int64))


def _combine(a: Intervals, b: Intervals, keep: str) -> Intervals:
    """The pieces covered by both sets (``keep="both"``), or by ``a`` only (``a`` and the gaps of ``b``)."""
    if len(a) == 0 or (keep == "both" and len(b) == 0):
        return Intervals.empty()
    if keep == "left_only":
        if len(b) == 0:
            return a
        b = _gaps(b)
    return _intersect(a, b)


_LOWEST, _HIGHEST = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _gaps(b: Intervals) -> Intervals:
    """Everything on the axis that ``b`` does not cover (its normal form: the pieces between b's pieces)."""
    starts = np.concatenate(([_LOWEST], b.ends))
    ends = np.concatenate((b.starts, [_HIGHEST]))
    keep = (
        ends > starts
    )  # only the outer ones can be empty (b starting at the axis' lowest point, say)
    return Intervals(starts[keep], ends[keep])


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    """``a & b`` of two normal forms without sorting: each piece of ``a`` meets the run of ``b``'s pieces from
    the first that ends after it starts to the last that starts before it ends; the pairs' overlaps come out in
    order and disjoint, and touching ones are joined as :func:`union` would."""
    first = np.searchsorted(b.ends, a.starts, side="right")
    stop = np.searchsorted(b.starts, a.ends, side="left")
    n = np.maximum(stop - first, 0)
    total = int(n.sum())
    if total == 0:
        return Intervals.empty()
    ia = np.repeat(np.arange(a.starts.size), n)
    # The b index of each pair: first[i], first[i] + 1, ... for each piece i of a.
    offsets = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    ib = np.repeat(first, n) + offsets
    starts = np.maximum(a.starts[ia], b.starts[ib])
    ends = np.minimum(a.ends[ia], b.ends[ib])
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return Intervals.empty()
    new_group = np.empty(starts.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = starts[1:] > ends[:-1]
    if new_group.all():
        return Intervals(starts, ends)
    last_of_group = np.append(np.flatnonzero(new_group)[1:] - 1, starts.size - 1)
    return Intervals(starts[new_group], ends[last_of_group])
