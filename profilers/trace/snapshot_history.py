"""A memory snapshot over time: the allocated total replayed from the device trace, and the stacks of the
allocation sites that hold the most memory at its peak.

``torch.cuda.memory._dump_snapshot`` keeps, per device, the allocator's recent ``alloc`` / ``free_completed``
events (``device_traces``) with their size, time (``time_us``, recent PyTorch) and Python stack (``frames``).
Replaying them gives memory over time; the level before the first recorded event is what the dump still holds
minus the net change over the history, so the curve ends at the allocated total of the dump.

``curve`` columns: ``device``, ``t_ms`` (ms since the device's first recorded event; the event's index when the
snapshot has no times), ``allocated_mib`` (the maximum in each of at most ``max_points`` buckets, so the peak
survives downsampling; the last point is the last event's level).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from profilers.trace.memory_snapshot import site_of

MIB = 1024**2
LIBRARY_PARTS = ("site-packages", "dist-packages", "/torch/", "\\torch\\")


@dataclass(frozen=True)
class SiteStack:
    """Live memory at the peak held by the allocations of one site; ``frames``: its largest allocation's stack
    (innermost frame first)."""

    bytes: int
    count: int
    frames: tuple[str, ...]  # "model.py:54 in forward"; library frames marked "(library)"
    where: str  # the allocation site (memory_snapshot.site_of): the first frame outside torch and site-packages


@dataclass(frozen=True)
class SnapshotHistory:
    curve: pd.DataFrame
    timed: bool  # True: ``t_ms`` is time; False: the event index (the snapshot recorded no times)
    peak_bytes: int | None
    top_stacks: tuple[SiteStack, ...]


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _frame(f: dict[str, Any]) -> tuple[str, bool]:
    filename = str(f.get("filename", "?"))
    library = any(part in filename for part in LIBRARY_PARTS)
    short = "/".join(filename.replace("\\", "/").split("/")[-2:])
    return (
        f"{short}:{f.get('line', '?')} in {f.get('name', '?')}{' (library)' if library else ''}",
        library,
    )


def _stack(frames: Any, depth: int) -> tuple[tuple[str, ...], str]:
    out: list[str] = []
    where: str | None = None
    for f in frames if isinstance(frames, list) else []:
        if not isinstance(f, dict):
            continue
        text, library = _frame(f)
        if where is None and not library:
            where = text
        if len(out) < depth:
            out.append(text)
    return tuple(out), where or (out[0] if out else "unknown (no stack recorded)")


def snapshot_history(
    doc: dict[str, Any], max_points: int = 2000, top: int = 5, depth: int = 12
) -> SnapshotHistory:
    """Memory over time and the top stacks at the peak, from a document of
    :func:`profilers.trace.memory_snapshot.read_snapshot_document`."""
    segments = [s for s in doc.get("segments", []) if isinstance(s, dict)]
    allocated_now = sum(_int(s.get("allocated_size")) for s in segments)
    raw_traces = doc.get("device_traces")
    traces: list[Any] = raw_traces if isinstance(raw_traces, list) else []
    frames: list[pd.DataFrame] = []
    peak_total: int | None = None
    stacks: tuple[SiteStack, ...] = ()
    timed = True
    for device, events in enumerate(traces):
        events = (
            [
                e
                for e in events
                if isinstance(e, dict) and e.get("action") in ("alloc", "free_completed")
            ]
            if isinstance(events, list)
            else []
        )
        if not events:
            continue
        delta = np.array(
            [_int(e.get("size")) * (1 if e["action"] == "alloc" else -1) for e in events],
            dtype=np.int64,
        )
        level = np.cumsum(delta)
        level += max(allocated_now - int(level[-1]), 0) if len(traces) == 1 else 0
        times = [e.get("time_us") for e in events]
        if all(isinstance(t, (int, float)) for t in times):
            t = (np.asarray(times, dtype=np.int64) - int(times[0])) / 1e3
        else:
            timed, t = False, np.arange(len(events), dtype=float)
        i_peak = int(level.argmax())
        if peak_total is None or int(level[i_peak]) > peak_total:
            peak_total = int(level[i_peak])
            stacks = _top_stacks(events[: i_peak + 1], top, depth)
        frames.append(_downsample(device, t, level, max_points))
    curve = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["device", "t_ms", "allocated_mib"])
    )
    return SnapshotHistory(curve=curve, timed=timed, peak_bytes=peak_total, top_stacks=stacks)


def _downsample(device: int, t: np.ndarray, level: np.ndarray, max_points: int) -> pd.DataFrame:
    df = pd.DataFrame({"t": t, "a": level / MIB})
    if len(df) > max_points:
        span = max(float(t[-1] - t[0]), 1e-9)
        df["b"] = np.minimum(((t - t[0]) / span * max_points).astype(int), max_points - 1)
        last = df.iloc[[-1]][
            ["t", "a"]
        ]  # the curve ends at the level the dump holds, not a bucket's maximum
        df = pd.concat(
            [df.groupby("b").agg(t=("t", "first"), a=("a", "max")).reset_index(drop=True), last],
            ignore_index=True,
        )
    return pd.DataFrame(
        {"device": device, "t_ms": df["t"].to_numpy(), "allocated_mib": df["a"].to_numpy()}
    )


def _top_stacks(events: list[dict[str, Any]], top: int, depth: int) -> tuple[SiteStack, ...]:
    """Replay up to the peak; group what is alive then by allocation site (:func:`memory_snapshot.site_of`, as
    the Analysis page's table does, so both pages give one number per site); the ``top`` sites by bytes, each
    with the stack of its largest allocation."""
    live: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["action"] == "alloc":
            live[_int(e.get("addr"))] = e
        else:
            live.pop(_int(e.get("addr")), None)
    size: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    largest: dict[str, tuple[int, tuple[str, ...]]] = {}
    for e in live.values():
        site, n = site_of(e.get("frames")), _int(e.get("size"))
        size[site] += n
        count[site] += 1
        if site not in largest or n > largest[site][0]:
            largest[site] = (n, _stack(e.get("frames"), depth)[0])
    best = sorted(size, key=lambda k: -size[k])[:top]
    return tuple(SiteStack(size[k], count[k], largest[k][1], k) for k in best)
