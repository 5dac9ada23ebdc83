"""Turn chunks of raw event dicts into typed columns, dropping (and counting) broken events.

The hot loop touches each event once and only appends raw values; typing, validation and interning
happen afterwards, vectorised (numpy / ``pandas.factorize``). Only what analyses use is kept: complete
(``ph == "X"``) events and ``[memory]`` instants; flow arrows and metadata are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from profilers.trace.events import GPU_KINDS, KINDS, kind_of
from profilers.trace.structs import NO_ARGS, Event


@dataclass
class RankColumns:
    """Columns of one rank's events, plus what was dropped and why."""

    events: pd.DataFrame
    memory: pd.DataFrame
    dropped: dict[str, int] = field(default_factory=dict)


#: Trace times must fit int64 nanoseconds with room for any difference of two: ``|ts|`` and ``|ts + dur|``
#: below 2**62 ns (about 146 years either side of the trace clock's zero). A value beyond is corrupt, not a time;
#: its event is dropped and counted like any other broken event.
MAX_TIME_US = 2.0**62 / 1000
OUT_OF_RANGE = "ts or ts+dur beyond ±2**62 ns"


def _num(x: Any) -> float:
    return float(x) if x.__class__ in (int, float) else float("nan")


def collect(chunks: Iterable[list[Any]]) -> RankColumns:
    """Columns of every chunk, converted chunk by chunk so raw dicts never outlive their chunk."""
    dropped: dict[str, int] = {}
    frames: list[pd.DataFrame] = []
    memories: list[pd.DataFrame] = []
    for chunk in chunks:
        events, memory = _collect_chunk(chunk, dropped)
        frames.append(events)
        memories.append(memory)
    if not frames:
        events, memory = _collect_chunk([], dropped)
        frames, memories = [events], [memory]
    return RankColumns(concat_frames(frames), pd.concat(memories, ignore_index=True), dropped)


def concat_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate event frames whose categorical columns have different categories."""
    if len(frames) == 1:
        return frames[0]
    for col in ("name", "tid", "dtype"):
        cats = union_categoricals([f[col] for f in frames]).categories
        frames = [f.assign(**{col: pd.Categorical(f[col], categories=cats)}) for f in frames]
    return pd.concat(frames, ignore_index=True)


_NO_ARGS: dict[str, Any] = {}


def _collect_structs(chunk: list[Event], dropped: dict[str, int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same columns from typed events (the fast path: attribute reads, no dict lookups)."""
    xs = [e for e in chunk if e.ph == "X"]
    args = [e.args or NO_ARGS for e in xs]
    events = _events_frame(
        ts=[e.ts for e in xs], dur=[e.dur for e in xs], cat=[e.cat for e in xs], name=[e.name for e in xs],
        pid=[e.pid for e in xs], tid=[e.tid for e in xs], corr=[a.correlation for a in args],
        dev=[a.device for a in args], stream=[a.stream for a in args], itype=[a.input_type for a in args],
        dropped=dropped)
    mem = [(e.ts, a.device_type, a.device_id, a.bytes, a.total_allocated, a.total_reserved)
           for e in chunk if e.ph in ("i", "I") and e.name == "[memory]" and (a := e.args) is not None]
    return events, _memory_frame(mem, dropped)


def _collect_chunk(chunk: list[Any], dropped: dict[str, int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    if chunk and chunk[0].__class__ is Event:
        return _collect_structs(chunk, dropped)
    # One list comprehension per field: measurably faster than one loop appending to ten lists.
    objs = [e for e in chunk if e.__class__ is dict]
    if len(objs) < len(chunk):
        dropped["not an object"] = dropped.get("not an object", 0) + len(chunk) - len(objs)
    xs = [e for e in objs if e.get("ph") == "X"]
    args = [a if a.__class__ is dict else _NO_ARGS for a in [e.get("args") for e in xs]]
    # Numeric defaults keep these lists all-number, so they convert on numpy's fast path.
    events = _events_frame(
        ts=[e.get("ts") for e in xs], dur=[e.get("dur") for e in xs], cat=[e.get("cat") for e in xs],
        name=[e.get("name") for e in xs], pid=[e.get("pid", -1) for e in xs], tid=[e.get("tid") for e in xs],
        corr=[a.get("correlation", -1) for a in args], dev=[a.get("device", -1) for a in args],
        stream=[a.get("stream", -1) for a in args], itype=[a.get("Input type") for a in args], dropped=dropped)
    mem = [(e.get("ts"), a.get("Device Type"), a.get("Device Id"), a.get("Bytes"), a.get("Total Allocated"),
            a.get("Total Reserved"))
           for e in objs if e.get("ph") in ("i", "I") and e.get("name") == "[memory]"
           and (a := e.get("args")).__class__ is dict]
    return events, _memory_frame(mem, dropped)


def _floats(values: list[Any]) -> np.ndarray:
    """Numbers as float64; anything else (None, strings, bools, huge ints) becomes NaN."""
    try:
        arr = np.array(values)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([], dtype=object)
    if arr.dtype.kind in "fiu" and arr.ndim == 1 and arr.size == len(values):
        return arr.astype(np.float64)
    return np.fromiter((_num(v) for v in values), dtype=np.float64, count=len(values))


_FLOAT_EXACT = 2.0**53  # below this magnitude a float64 is the exact value of the int it came from
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _ints(values: list[Any], default: int) -> np.ndarray:
    """Ids (correlation, pid, device, stream...) as exact int64; anything else, or beyond int64, is ``default``.

    All-int lists take numpy's int64 fast path (exact). numpy turns a list with a float, or with an int beyond
    int64, into float64, which cannot tell 2**53 from 2**53 + 1: only then is the list read value by value.
    """
    try:
        arr = np.array(values)
    except (TypeError, ValueError, OverflowError):
        arr = np.array([], dtype=object)
    if arr.ndim == 1 and arr.size == len(values):
        if arr.dtype.kind == "i":
            return arr.astype(np.int64, copy=False)
        if arr.dtype.kind == "f" and not (np.abs(arr) >= _FLOAT_EXACT).any():  # NaN compares False
            arr[~np.isfinite(arr)] = default
            return arr.astype(np.int64)
    return np.fromiter((_exact_int(v, default) for v in values), dtype=np.int64, count=len(values))


def _exact_int(v: Any, default: int) -> int:
    if v.__class__ is int:
        return v if _INT64_MIN <= v <= _INT64_MAX else default
    if v.__class__ is float and -(2.0**63) < v < 2.0**63:  # False for NaN and infinities
        return int(v)
    return default


def to_ns(ts_us: np.ndarray) -> np.ndarray:
    """Microsecond floats to integer nanoseconds without losing sub-µs precision on large epochs."""
    if ts_us.size == 0:
        return ts_us.astype(np.int64)
    base = np.floor(np.nanmin(ts_us))
    # Keep the sum in integers: float64 cannot hold a 2021 epoch in ns to the nanosecond.
    return np.int64(base) * 1000 + np.rint((ts_us - base) * 1000).astype(np.int64)


def _categorical(values: list[Any]) -> pd.Categorical:
    """Intern values into a categorical with object-dtype categories (the same dtype in every chunk)."""
    codes, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=False)
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object))


def _first_dtype(types: Any) -> str:
    """The first non-empty entry of a record_shapes ``Input type`` list (e.g. "float", "c10::BFloat16")."""
    if types.__class__ is list:
        for t in types:
            if t.__class__ is str and t:
                return t
    return ""


def _events_frame(ts, dur, cat, name, pid, tid, corr, dev, stream, itype, dropped: dict[str, int]) -> pd.DataFrame:
    ts_f, dur_f = _floats(ts), _floats(dur)
    bad_time = ~np.isfinite(ts_f) | ~np.isfinite(dur_f)
    negative = ~bad_time & (dur_f < 0)
    with np.errstate(over="ignore", invalid="ignore"):
        beyond = ~bad_time & ((np.abs(ts_f) >= MAX_TIME_US) | (np.abs(ts_f + dur_f) >= MAX_TIME_US))
    name_codes_all, name_uniques_all = pd.factorize(np.array(name, dtype=object), use_na_sentinel=False)
    bad_unique = np.fromiter((v.__class__ is not str for v in name_uniques_all), dtype=bool,
                             count=len(name_uniques_all))
    bad_name = bad_unique[name_codes_all] if len(name) else np.zeros(0, dtype=bool)
    taken = np.zeros(len(ts), dtype=bool)
    for reason, mask in (("missing or non-numeric ts/dur", bad_time), ("negative duration", negative),
                         (OUT_OF_RANGE, beyond), ("missing or non-string name", bad_name)):
        n = int((mask & ~taken).sum())  # each event counted once, under its first reason
        if n:
            dropped[reason] = dropped.get(reason, 0) + n
        taken |= mask
    idx = np.flatnonzero(~taken)
    all_kept = idx.size == len(ts)

    def pick(values: list[Any]) -> list[Any]:
        return values if all_kept else [values[i] for i in idx]

    start_ns = to_ns(ts_f[idx])
    dur_ns = np.rint(dur_f[idx] * 1000).astype(np.int64)
    kind_codes, kind_uniques = pd.factorize(np.array(pick(cat), dtype=object), use_na_sentinel=False)
    kind_map = np.array([KINDS.index(kind_of(c if isinstance(c, str) else None)) for c in kind_uniques], dtype=np.int8)
    kinds = pd.Categorical.from_codes(kind_map[kind_codes] if idx.size else np.zeros(0, np.int8),
                                      categories=pd.Index(KINDS))
    if all_kept:
        name_codes, name_uniques = name_codes_all, name_uniques_all
    else:
        name_codes, name_uniques = pd.factorize(np.array(pick(name), dtype=object), use_na_sentinel=False)
    tid_codes, tid_uniques = pd.factorize(np.array(pick(tid), dtype=object), use_na_sentinel=False)
    # 7 and "7" in one file are the same thread: intern on the string form.
    tid_labels, tid_inverse = np.unique(np.array([str(t) for t in tid_uniques], dtype=object), return_inverse=True)
    tid_codes = tid_inverse[tid_codes] if idx.size else tid_codes
    pid_arr = _ints(pick(pid), -1)
    is_gpu = np.isin(kinds.codes, [KINDS.index(k) for k in GPU_KINDS])
    device = np.where(is_gpu, _ints(pick(dev), -1), -1)
    device = np.where(is_gpu & (device < 0), pid_arr, device).astype(np.int16)
    stream_arr = np.where(is_gpu, _ints(pick(stream), -1), -1).astype(np.int32)
    return pd.DataFrame({
        "kind": kinds,
        "name": pd.Categorical.from_codes(name_codes, categories=pd.Index(name_uniques, dtype=object)),
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "end_ns": start_ns + dur_ns,
        "pid": pid_arr,
        "tid": pd.Categorical.from_codes(tid_codes, categories=pd.Index(tid_labels, dtype=object)),
        "device": device,
        "stream": stream_arr,
        "correlation": _ints(pick(corr), -1),
        "dtype": _categorical(["" if t is None else _first_dtype(t) for t in pick(itype)]),
    })


def _memory_frame(rows: list[tuple[Any, ...]], dropped: dict[str, int]) -> pd.DataFrame:
    cols = ["ts_ns", "device_type", "device_id", "bytes", "total_allocated", "total_reserved"]
    if not rows:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})
    raw = list(zip(*rows))
    ts = _floats(list(raw[0]))
    ok = np.isfinite(ts)
    beyond = ok & (np.abs(ts) >= MAX_TIME_US)
    for key, mask in (("[memory] event without numeric ts", ~ok), ("[memory] event with ts beyond ±2**62 ns", beyond)):
        if mask.any():
            dropped[key] = dropped.get(key, 0) + int(mask.sum())
    ok &= ~beyond
    frame = {"ts_ns": to_ns(ts[ok])}
    for col, values in zip(cols[1:], raw[1:]):
        frame[col] = _ints(list(values), 0)[ok]
    return pd.DataFrame(frame)
