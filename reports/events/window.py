"""The event-level view's data: any time window of a trace, re-bucketed on the server.

:func:`event_index` runs once per trace (the dashboard keeps it beside the loaded trace): per rank, the interval
set each step-time category claims (the breakdown's own priority claim), the step spans and the trace's time
origin. :func:`window_timeline` then cuts any window ``[start_ms, end_ms)`` into at most ``buckets`` buckets and
measures each category in each bucket — a few binary searches per category, however large the trace — and
:func:`window_events` returns the events themselves once a window holds few enough of them to draw one by one.
The browser only ever receives these small frames, never the raw trace.

Times are ms from the earliest step start (the axis of :mod:`profilers.frames.timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profilers.trace.breakdown import CATEGORIES, claimed_by_category
from profilers.trace.events import Trace
from profilers.trace.intervals import Intervals
from profilers.frames.timeline import step_spans

DEFAULT_BUCKETS = 400
MAX_EVENTS = 1500  # drawn one by one at most; beyond, the window stays bucketed
EVENT_COLUMNS = ["kind", "name", "lane", "depth", "start_ms", "dur_ms"]


@dataclass(frozen=True)
class EventIndex:
    """What re-bucketing needs, built once per trace."""

    origin_ns: int
    end_ns: int
    ranks: tuple[int, ...]
    claims: dict[int, dict[str, Intervals]]
    spans: pd.DataFrame
    n_events: int

    @property
    def span_ms(self) -> float:
        return (self.end_ns - self.origin_ns) / 1e6


def event_index(trace: Trace) -> EventIndex:
    """Per-rank category claims and step spans of ``trace`` (the costly part, done once)."""
    if trace.steps.empty:
        return EventIndex(0, 0, (), {}, step_spans(trace), trace.n_events)
    ranks = tuple(int(r) for r in sorted(trace.steps["rank"].unique().tolist()))
    return EventIndex(
        origin_ns=int(trace.steps["start_ns"].min()),
        end_ns=int(trace.steps["end_ns"].max()),
        ranks=ranks,
        claims={r: claimed_by_category(trace, r) for r in ranks},
        spans=step_spans(trace),
        n_events=trace.n_events,
    )


def clamp_window(index: EventIndex, start_ms: float, end_ms: float) -> tuple[float, float]:
    """A window inside the trace, at least 1 µs wide, whatever the inputs (reversed, outside, equal)."""
    lo, hi = sorted((float(start_ms), float(end_ms)))
    lo = min(max(lo, 0.0), index.span_ms)
    hi = min(max(hi, 0.0), index.span_ms)
    if hi - lo < 1e-3:
        lo, hi = max(0.0, min(lo, index.span_ms - 1e-3)), min(index.span_ms, max(lo, 0.0) + 1e-3)
    return lo, hi


def window_timeline(
    index: EventIndex, rank: int, start_ms: float, end_ms: float, buckets: int = DEFAULT_BUCKETS
) -> pd.DataFrame:
    """``rank, t_ms, width_ms`` then one column per category (ms claimed in the bucket), for one window."""
    cols = ["rank", "t_ms", "width_ms", *CATEGORIES]
    if rank not in index.claims:
        return pd.DataFrame(columns=cols)
    lo_ms, hi_ms = clamp_window(index, start_ms, end_ms)
    lo_ns, hi_ns = (
        index.origin_ns + int(round(lo_ms * 1e6)),
        index.origin_ns + int(round(hi_ms * 1e6)),
    )
    n = max(1, min(int(buckets), (hi_ns - lo_ns) // 1000 or 1))  # never finer than 1 µs
    edges = lo_ns + np.linspace(0, hi_ns - lo_ns, n + 1).round().astype(np.int64)
    lo, hi = edges[:-1], edges[1:]
    frame = pd.DataFrame(
        {
            "rank": np.full(n, rank),
            "t_ms": (lo - index.origin_ns) / 1e6,
            "width_ms": (hi - lo) / 1e6,
        }
    )
    sets = index.claims[rank]
    for cat in CATEGORIES:
        frame[cat] = sets[cat].covered_in(lo, hi) / 1e6 if cat in sets else np.zeros(n)
    return frame[cols]


def window_events(
    trace: Trace,
    index: EventIndex,
    rank: int,
    start_ms: float,
    end_ms: float,
    limit: int = MAX_EVENTS,
) -> tuple[pd.DataFrame | None, int]:
    """The events of ``rank`` overlapping the window (``EVENT_COLUMNS``; ``lane`` is the host thread or GPU
    stream), and how many there are. ``None`` instead of the frame when there are more than ``limit``."""
    lo_ms, hi_ms = clamp_window(index, start_ms, end_ms)
    ev = trace.events
    lo_ns, hi_ns = index.origin_ns + int(lo_ms * 1e6), index.origin_ns + int(np.ceil(hi_ms * 1e6))
    r = ev["rank"].to_numpy()
    first, last = np.searchsorted(r, rank, "left"), np.searchsorted(r, rank, "right")
    starts = ev["start_ns"].to_numpy()[first:last]
    upto = first + int(np.searchsorted(starts, hi_ns, "left"))  # events are sorted by rank, start
    part = ev.iloc[first:upto]
    part = part[part["end_ns"].to_numpy() > lo_ns]
    if len(part) > limit:
        return None, len(part)
    gpu = part["device"].to_numpy() >= 0
    lane = np.where(
        gpu, "GPU stream " + part["stream"].astype(str), "host thread " + part["tid"].astype(str)
    )
    depth = nesting_depth(lane, part["start_ns"].to_numpy(), part["end_ns"].to_numpy(), ~gpu)
    return pd.DataFrame(
        {
            "kind": part["kind"].astype(str).to_numpy(),
            "name": part["name"].astype(str).to_numpy(),
            "lane": lane,
            "depth": depth,
            "start_ms": (part["start_ns"].to_numpy() - index.origin_ns) / 1e6,
            "dur_ms": part["dur_ns"].to_numpy() / 1e6,
        }
    ), len(part)


def nesting_depth(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, nested: np.ndarray
) -> np.ndarray:
    """Per event, how many events of its lane enclose it (0: outermost), where ``nested`` (host threads: an op
    inside an op, as Perfetto draws them); 0 elsewhere. Ties on start: the longer event is the outer one."""
    depth = np.zeros(len(lane), dtype=np.int64)
    order = np.lexsort((-(end - start), start, lane))
    open_ends: dict[str, list[int]] = {}
    for i in order:
        if not nested[i]:
            continue
        stack = open_ends.setdefault(str(lane[i]), [])
        while stack and stack[-1] <= start[i]:  # ended before this one starts
            stack.pop()
        depth[i] = len(stack)
        stack.append(int(end[i]))
    return depth
