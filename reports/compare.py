"""Compare two analyses (runs or traces): step time, breakdown deltas and the kernels/ops that moved most.

All times are ms **per step** (per (rank, step) row of the breakdown), so a 5-step trace and a 50-step run
compare fairly. A positive ``delta_ms`` means B spends more than A.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profilers.breakdown import CATEGORIES
from reports.analysis import Analysis

TOP_DELTAS = 15


@dataclass(frozen=True)
class Comparison:
    """``categories``: category, a_ms, b_ms, delta_ms. ``kernels``/``ops``: name, a_ms, b_ms, delta_ms (largest
    moves first). ``step_ms``: the per-step samples of each side (see :func:`step_samples`)."""

    label_a: str
    label_b: str
    step_ms_a: tuple[float, ...]
    step_ms_b: tuple[float, ...]
    categories: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame

    @property
    def speedup(self) -> float | None:
        """Median step time of A over that of B (> 1: B is faster)."""
        if not self.step_ms_a or not self.step_ms_b:
            return None
        b = float(np.median(self.step_ms_b))
        return float(np.median(self.step_ms_a)) / b if b > 0 else None


def step_samples(a: Analysis) -> tuple[float, ...]:
    """Per-step times in ms: a run's measured steps (slowest rank, first step skipped), else the trace's steps."""
    s = a.steps
    if not s.empty and s["wall_ms"].notna().any():
        per_step = s.groupby("step")["wall_ms"].max().sort_index().dropna()
        if len(per_step) > 1:
            per_step = per_step.iloc[1:]
        return tuple(round(float(v), 4) for v in per_step)
    if a.breakdown is not None and len(a.breakdown.per_step):
        return tuple(round(float(v) / 1e6, 4) for v in a.breakdown.per_step["step_ns"])
    return ()


def _per_step_ms(a: Analysis) -> pd.Series:
    if a.breakdown is None or not len(a.breakdown.per_step):
        return pd.Series(0.0, index=list(CATEGORIES))
    return a.breakdown.per_step[list(CATEGORIES)].mean() / 1e6


def _table_delta(ta: pd.DataFrame | None, tb: pd.DataFrame | None, na: int, nb: int) -> pd.DataFrame:
    cols = ["name", "a_ms", "b_ms", "delta_ms"]
    parts = []
    for t, n, col in ((ta, na, "a_ms"), (tb, nb, "b_ms")):
        if t is not None and len(t):
            parts.append(t.groupby("name")["total_ns"].sum().rename(col) / 1e6 / max(n, 1))
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat(parts, axis=1).fillna(0.0)
    for col in ("a_ms", "b_ms"):
        if col not in df:
            df[col] = 0.0
    df["delta_ms"] = df["b_ms"] - df["a_ms"]
    df = df.reset_index().rename(columns={"index": "name"})
    order = df["delta_ms"].abs().sort_values(ascending=False).index[:TOP_DELTAS]
    return df.loc[order, cols].reset_index(drop=True)


def compare(a: Analysis, b: Analysis) -> Comparison:
    """A vs B (see :class:`Comparison`)."""
    ca, cb = _per_step_ms(a), _per_step_ms(b)
    cats = pd.DataFrame({"category": list(CATEGORIES), "a_ms": ca.to_numpy(), "b_ms": cb.to_numpy()})
    cats["delta_ms"] = cats["b_ms"] - cats["a_ms"]
    ba, bb = a.breakdown, b.breakdown
    na, nb = (len(x.per_step) if x is not None else 1 for x in (ba, bb))
    return Comparison(
        label_a=a.label, label_b=b.label, step_ms_a=step_samples(a), step_ms_b=step_samples(b),
        categories=cats,
        kernels=_table_delta(ba.kernels if ba else None, bb.kernels if bb else None, na, nb),
        ops=_table_delta(ba.ops if ba else None, bb.ops if bb else None, na, nb),
    )
