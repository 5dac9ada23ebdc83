"""What moved between two breakdowns: time per step by category, kernel and host operator, B − A.

All times are ms **per step** (per (rank, step) row of each breakdown), so a 5-step trace and a 50-step run
compare fairly. A positive delta means B (the new side) spends more than A (the base). The category deltas
add up to the change of the mean profiled step (the categories of a step add up to the step); the kernel and
operator tables do not add up to anything (kernels overlap, host operators nest: their time is inclusive).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from profilers.trace.breakdown import CATEGORIES, Breakdown

TOP_DELTAS = 15  # rows of the kernel/operator delta tables
TOP_MOVERS = 5  # movers of each kind the verdict names
DELTA_COLUMNS = ["name", "a_ms", "b_ms", "delta_ms"]


@dataclass(frozen=True)
class Mover:
    """One category, kernel or operator: ms per step on each side."""

    name: str
    base_ms: float
    new_ms: float

    @property
    def delta_ms(self) -> float:
        return self.new_ms - self.base_ms


@dataclass(frozen=True)
class Movers:
    """The largest moves first (by absolute delta), at most :data:`TOP_MOVERS` of each kind, none that is 0."""

    categories: tuple[Mover, ...]
    kernels: tuple[Mover, ...]
    operators: tuple[Mover, ...]

    @property
    def largest(self) -> Mover | None:
        """The category that moved most: where the step's time went (or came from)."""
        return self.categories[0] if self.categories else None


NO_MOVERS = Movers((), (), ())


def category_ms(b: Breakdown | None) -> pd.Series:
    """Mean ms per (rank, step) row in each category (zeros without a breakdown)."""
    if b is None or not len(b.per_step):
        return pd.Series(0.0, index=list(CATEGORIES))
    return b.per_step[list(CATEGORIES)].mean() / 1e6


def category_deltas(a: Breakdown | None, b: Breakdown | None) -> pd.DataFrame:
    """``category, a_ms, b_ms, delta_ms`` for every category, in :data:`CATEGORIES` order."""
    ca, cb = category_ms(a), category_ms(b)
    cats = pd.DataFrame(
        {"category": list(CATEGORIES), "a_ms": ca.to_numpy(), "b_ms": cb.to_numpy()}
    )
    cats["delta_ms"] = cats["b_ms"] - cats["a_ms"]
    return cats


def name_deltas(
    ta: pd.DataFrame | None, tb: pd.DataFrame | None, na: int, nb: int, top: int = TOP_DELTAS
) -> pd.DataFrame:
    """``name, a_ms, b_ms, delta_ms`` of a kernel or operator table (``name``, ``total_ns``) on each side,
    ``na``/``nb`` the (rank, step) rows each total is spread over; the ``top`` largest moves first."""
    parts = []
    for t, n, col in ((ta, na, "a_ms"), (tb, nb, "b_ms")):
        if t is not None and len(t):
            parts.append(t.groupby("name")["total_ns"].sum().rename(col) / 1e6 / max(n, 1))
    if not parts:
        return pd.DataFrame(columns=DELTA_COLUMNS)
    df = pd.concat(parts, axis=1).fillna(0.0)
    for col in ("a_ms", "b_ms"):
        if col not in df:
            df[col] = 0.0
    df["delta_ms"] = df["b_ms"] - df["a_ms"]
    df = df.reset_index().rename(columns={"index": "name"})
    order = df["delta_ms"].abs().sort_values(ascending=False, kind="stable").index[:top]
    return df.loc[order, DELTA_COLUMNS].reset_index(drop=True)


def kernel_deltas(a: Breakdown | None, b: Breakdown | None, top: int = TOP_DELTAS) -> pd.DataFrame:
    return name_deltas(a.kernels if a else None, b.kernels if b else None, _rows(a), _rows(b), top)


def op_deltas(a: Breakdown | None, b: Breakdown | None, top: int = TOP_DELTAS) -> pd.DataFrame:
    return name_deltas(a.ops if a else None, b.ops if b else None, _rows(a), _rows(b), top)


def movers(base: Breakdown | None, new: Breakdown | None, top: int = TOP_MOVERS) -> Movers:
    """The categories, kernels and operators whose time per step changed most (none without both breakdowns)."""
    if base is None or new is None:
        return NO_MOVERS
    cats = category_deltas(base, new).rename(columns={"category": "name"})
    cats = cats.loc[cats["delta_ms"].abs().sort_values(ascending=False, kind="stable").index]
    return Movers(
        categories=_top(cats, top),
        kernels=_top(kernel_deltas(base, new, top), top),
        operators=_top(op_deltas(base, new, top), top),
    )


def _top(table: pd.DataFrame, top: int) -> tuple[Mover, ...]:
    rows = table[table["delta_ms"] != 0].head(top)
    return tuple(
        Mover(name=str(name), base_ms=float(a_ms), new_ms=float(b_ms))
        for name, a_ms, b_ms in zip(
            rows["name"].tolist(), rows["a_ms"].tolist(), rows["b_ms"].tolist()
        )
    )


def _rows(b: Breakdown | None) -> int:
    return len(b.per_step) if b is not None else 1
