"""A downsampled step timeline: which category claims the time, bucket by bucket, on every rank.

The raw trace never leaves the server. Per rank, the breakdown's own priority claim
(:func:`profilers.trace.breakdown.claimed_by_category`) yields one interval set per category; the window from the first step start to the last step end is cut into at most ``buckets`` equal
buckets and each set's covered time is measured per bucket. A trace of any size becomes
``ranks × buckets`` rows.

``category_timeline`` columns: ``rank``, ``t_ms`` (bucket start, ms from the earliest step start of any rank),
``width_ms``, then one column per :data:`~profilers.trace.breakdown.CATEGORIES` in ms (time outside steps is not
counted; inside steps ``other`` takes what no category claims).

``step_spans`` columns: ``rank, step, start_ms, end_ms`` on the same axis.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profilers.trace.breakdown import CATEGORIES, claimed_by_category
from profilers.trace.events import Trace

DEFAULT_BUCKETS = 400


def _origin_ns(trace: Trace) -> int:
    return int(trace.steps["start_ns"].min()) if len(trace.steps) else 0


def step_spans(trace: Trace) -> pd.DataFrame:
    """Step boundaries per rank in ms from the earliest step start."""
    s = trace.steps
    origin = _origin_ns(trace)
    return pd.DataFrame(
        {
            "rank": s["rank"].astype(int).to_numpy(),
            "step": s["step"].astype(int).to_numpy(),
            "start_ms": (s["start_ns"].to_numpy() - origin) / 1e6,
            "end_ms": (s["end_ns"].to_numpy() - origin) / 1e6,
        }
    )


def category_timeline(trace: Trace, buckets: int = DEFAULT_BUCKETS) -> pd.DataFrame:
    """Per rank and time bucket, the ms each category claims (see the module docs for the columns)."""
    cols = ["rank", "t_ms", "width_ms", *CATEGORIES]
    if trace.steps.empty:
        return pd.DataFrame(columns=cols)
    origin = _origin_ns(trace)
    end = int(trace.steps["end_ns"].max())
    n = max(1, min(int(buckets), max(1, (end - origin) // 1000)))  # never finer than 1 µs
    # Offsets first: epoch nanoseconds (~1.6e18) do not survive a float64 linspace exactly.
    edges = origin + np.linspace(0, end - origin, n + 1).round().astype(np.int64)
    lo, hi = edges[:-1], edges[1:]
    frames = []
    for rank in sorted(trace.steps["rank"].unique().tolist()):
        sets = claimed_by_category(trace, int(rank))
        frame = pd.DataFrame(
            {
                "rank": np.full(n, int(rank)),
                "t_ms": (lo - origin) / 1e6,
                "width_ms": (hi - lo) / 1e6,
            }
        )
        for cat in CATEGORIES:
            frame[cat] = sets[cat].covered_in(lo, hi) / 1e6 if cat in sets else np.zeros(n)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)[cols]


def memory_series(trace: Trace, max_points: int = 1500) -> pd.DataFrame:
    """``[memory]`` samples downsampled per (rank, device): ``rank, device, t_ms, allocated_mb, reserved_mb``.

    Each time bucket keeps its maximum, so the peak survives downsampling. ``device`` is ``"device"`` (CUDA/HIP)
    or ``"host"``.
    """
    m = trace.memory
    cols = ["rank", "device", "t_ms", "allocated_mb", "reserved_mb"]
    if m is None or m.empty:
        return pd.DataFrame(columns=cols)
    origin = _origin_ns(trace) or int(m["ts_ns"].min())
    frames = []
    for (_, is_host), g in m.groupby([m["rank"], m["device_type"] == 0], sort=True):
        t = (g["ts_ns"].to_numpy() - origin) / 1e6
        alloc = g["total_allocated"].to_numpy(dtype=float) / 1024**2
        reserved = g["total_reserved"].to_numpy(dtype=float) / 1024**2
        if len(t) > max_points:
            bucket = np.minimum(
                ((t - t.min()) / max(np.ptp(t), 1e-9) * max_points).astype(int), max_points - 1
            )
            df = (
                pd.DataFrame({"b": bucket, "t": t, "a": alloc, "r": reserved})
                .groupby("b")
                .agg(t=("t", "first"), a=("a", "max"), r=("r", "max"))
            )
            t, alloc, reserved = df["t"].to_numpy(), df["a"].to_numpy(), df["r"].to_numpy()
        rank = int(g["rank"].iloc[0])  # the group's key
        frames.append(
            pd.DataFrame(
                {
                    "rank": rank,
                    "device": "host" if is_host else "device",
                    "t_ms": t,
                    "allocated_mb": alloc,
                    "reserved_mb": reserved,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)[cols]
