"""``load_trace(path) -> Trace``: read every rank file behind a path and normalise it once.

See :mod:`profilers.trace.events` for the columns. What is tolerated (and said in ``Trace.warnings``): no
``distributedInfo`` (rank from the file name, else file order), no ``ProfilerStep`` markers (each rank's whole
window is one step), duplicate step ids (the first is kept), individually broken events (dropped, counted: see
:mod:`profilers.trace.columns`), a rank that is negative or beyond int32 (the next free rank is used). A file with
no usable event is an error, and so is a ``ProfilerStep#N`` whose N no int64 holds (step ids are exact).
"""

from __future__ import annotations

import gc
import os
import re
from typing import Any, Iterator

import numpy as np
import pandas as pd

from profilers.errors import TraceError
from profilers.efficiency.accelerator import accelerator_family
from profilers.trace.columns import concat_frames, rank_columns
from profilers.trace.events import KINDS, DeviceInfo, Trace
from profilers.trace.parallel import ParallelReader, RawDocument, read_documents, take_primed
from profilers.trace.raw_columns import MAX_NAME_CHARS
from profilers.trace.sources import TraceFile, find_trace_files

_STEP = re.compile(r"ProfilerStep#(\d+)")
_HOST_STEP_KINDS = ("cpu_op", "user_annotation")
_INT64_MAX = 2**63 - 1
_MAX_RANK = 2**31 - 1  # the rank column is int32


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Load a trace file, a folder of per-rank files, a TensorBoard log dir, a zip or a stored run folder."""
    files = find_trace_files(path)
    return load_trace_files(files, str(path), take_primed(path, files))


def load_trace_files(
    files: list[TraceFile], source: str, reader: ParallelReader | None = None, first_order: int = 0
) -> Trace:
    """Load the given rank files (each one openable Kineto JSON document, gzipped or not) as one trace.

    The entry point for a container :func:`~profilers.trace.sources.find_trace_files` does not know: a reader
    that finds the rank files its own way (see :mod:`profilers.inputs`) hands them here. The files are read on
    worker processes where that helps (:mod:`profilers.trace.parallel`); ``reader`` is one already started.
    ``first_order``: the position of ``files[0]`` in a larger set read one file at a time (a rank file with no
    rank of its own is read as that position's rank, as it would be with the whole set)."""
    if not files:
        raise TraceError(f"{source}: no trace files")
    # Parsing allocates millions of short-lived dicts that hold no cycles: the cyclic GC only slows it down.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(
            read_documents(files) if reader is None else reader.documents(), source, first_order
        )
    finally:
        if was_enabled:
            gc.enable()


def _load(
    documents: Iterator[tuple[TraceFile, RawDocument]], source: str, first_order: int = 0
) -> Trace:
    frames: list[pd.DataFrame] = []
    memories: list[pd.DataFrame] = []
    warnings: list[str] = []
    devices: dict[int, DeviceInfo] = {}
    world_size: int | None = None
    backend: str | None = None
    cuda_runtime: str | None = None
    used_ranks: set[int] = set()
    processes: list[str] = []
    for order, (f, doc) in enumerate(documents, start=first_order):
        cols = rank_columns(doc.parts)
        warnings.extend(doc.notes)
        if cols.dropped:
            detail = ", ".join(f"{n} {why}" for why, n in cols.dropped.items())
            warnings.append(f"{f.name}: dropped broken events ({detail})")
        if cols.shortened:
            warnings.append(
                f"{f.name}: {cols.shortened} event name(s) longer than {MAX_NAME_CHARS // 1024} kB "
                "kept shortened to their start"
            )
        if cols.events.empty:
            raise TraceError(
                f"{f.name}: no usable trace events (complete 'X' events with ts and dur)"
            )
        info = raw if isinstance(raw := doc.top.get("distributedInfo"), dict) else {}
        rank = _rank(info, f.rank_hint, order, used_ranks, f.name, warnings)
        used_ranks.add(rank)
        world_size = world_size or _int_or_none(info.get("world_size"))
        backend = backend or (info.get("backend") if isinstance(info.get("backend"), str) else None)
        cuda_runtime = cuda_runtime or cuda_version(doc.top.get("cuda_runtime_version"))
        for d in _devices(doc.top):
            devices.setdefault(d.index, d)
        processes.extend(cols.processes)
        frames.append(cols.events.assign(rank=np.int32(rank)))
        memories.append(cols.memory.assign(rank=np.int32(rank)))
    events = _concat(frames)
    steps, inferred = _steps(events, warnings)
    events["step"] = _assign_steps(events, steps)
    return Trace(
        events=events,
        steps=steps,
        memory=_totals_from_changes(pd.concat(memories, ignore_index=True), warnings)
        if memories
        else pd.DataFrame(),
        ranks=tuple(sorted(used_ranks)),
        devices=tuple(devices[k] for k in sorted(devices)),
        world_size=world_size,
        backend=backend,
        steps_inferred=inferred,
        source=source,
        warnings=tuple(warnings),
        accelerator=None if devices else accelerator_family(processes, backend),
        cuda_runtime=cuda_runtime,
    )


def cuda_version(raw: Any) -> str | None:
    """A CUDA version as ``torch.version.cuda`` writes it ("12.4"): Kineto records the runtime's as an
    integer (``12040`` = 12.4) or, in some writers, as text ("12.8.93", kept as it is)."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int):
        return f"{raw // 1000}.{raw % 1000 // 10}" if raw > 0 else None
    if isinstance(raw, str) and raw.strip():
        return raw.strip()
    return None


def _totals_from_changes(memory: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """Older Kineto ``[memory]`` events record each allocation's byte change (``Bytes``) and no totals: per rank
    and device, the allocated total is then the changes added up in time order, shifted so that its lowest
    point is 0 (what was allocated before the trace began is unknown, so the curve is a lower bound)."""
    if memory.empty or "bytes" not in memory:
        return memory
    keys = ["rank", "device_type", "device_id"]
    has_totals = (
        (memory["total_allocated"] != 0).groupby([memory[k] for k in keys]).transform("any")
    )
    changes = (memory["bytes"] != 0).groupby([memory[k] for k in keys]).transform("any")
    rebuild = (~has_totals & changes).to_numpy()
    if not rebuild.any():
        return memory  # totals recorded (or nothing changed): the frame as read, untouched
    total = memory["total_allocated"].to_numpy().copy()
    order = memory.sort_values([*keys, "ts_ns"], kind="stable").index.to_numpy()
    sub = memory.loc[order]
    for _, idx in sub[rebuild[order]].groupby(keys, sort=False).groups.items():
        level = memory.loc[idx, "bytes"].cumsum().to_numpy()
        total[memory.index.get_indexer(idx)] = level - min(int(level.min()), 0)
    warnings.append(
        "the trace's [memory] events record byte changes, not totals: memory over time adds the "
        "changes up from the trace's start (a lower bound: what was allocated before is not known)"
    )
    return memory.assign(total_allocated=total.astype(np.int64))


def _int_or_none(v: Any) -> int | None:
    """An integer field of the trace's header, or None when it is not a number an int64 holds."""
    if (
        not isinstance(v, (int, float)) or isinstance(v, bool) or not -(2**63) <= v <= _INT64_MAX
    ):  # NaN fails too
        return None
    return int(v)


def _rank(
    info: dict, hint: int | None, order: int, used: set[int], name: str, warnings: list[str]
) -> int:
    for candidate in (_int_or_none(info.get("rank")), hint):
        if candidate is not None and 0 <= candidate <= _MAX_RANK and candidate not in used:
            return candidate
    fallback = order
    while fallback in used:
        fallback += 1
    if _int_or_none(info.get("rank")) is not None or hint is not None:
        warnings.append(
            f"{name}: its rank is negative, beyond int32 or taken by another file; read as rank {fallback}"
        )
    return fallback


def _devices(top: dict[str, Any]) -> list[DeviceInfo]:
    props = top.get("deviceProperties") or top.get("computeProperties") or []
    out = []
    for i, p in enumerate(props if isinstance(props, list) else []):
        if isinstance(p, dict):
            mem = _int_or_none(p.get("totalGlobalMem"))
            out.append(
                DeviceInfo(_int_or_none(p.get("id")) or i, str(p.get("name", f"GPU {i}")), mem)
            )
    return out


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    events = concat_frames(frames)
    return events.sort_values(["rank", "start_ns"], kind="stable", ignore_index=True)


def _steps(events: pd.DataFrame, warnings: list[str]) -> tuple[pd.DataFrame, bool]:
    names = events["name"].cat.categories
    step_ids = {
        code: _step_id(m.group(1)) for code, n in enumerate(names) if (m := _STEP.fullmatch(str(n)))
    }
    host = events["kind"].isin(_HOST_STEP_KINDS).to_numpy()
    codes = events["name"].cat.codes.to_numpy()
    is_step = host & np.isin(codes, list(step_ids)) if step_ids else np.zeros(len(events), bool)
    marked = events.loc[is_step, ["rank", "start_ns", "end_ns"]].copy()
    marked["step"] = [step_ids[c] for c in codes[is_step]]
    if marked.empty:
        return _step_frame(_unmarked_window(events, warnings)), True
    before = len(marked)
    marked = marked.sort_values(["rank", "start_ns"]).drop_duplicates(
        ["rank", "step"], keep="first"
    )
    if len(marked) < before:
        warnings.append(
            f"{before - len(marked)} duplicate ProfilerStep ids on a rank: the first of each is kept"
        )
    return _step_frame(marked), False


def _unmarked_window(events: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """One step per rank for a trace without markers: on a rank with device activity, from its first kernel,
    copy or set to its last (the host start-up before the first kernel is not a step: read as one it made
    the step look host-bound); on a host-only rank, the whole window."""
    win = (
        events.groupby("rank")
        .agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
        .reset_index()
    )
    device = events[events["kind"].isin(["kernel", "memcpy", "memset"])]
    lead = 0
    if len(device):
        active = device.groupby("rank").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
        on = win["rank"].isin(active.index)
        lead = int(
            (
                active.loc[win.loc[on, "rank"], "start_ns"].to_numpy()
                - win.loc[on, "start_ns"].to_numpy()
            ).max()
        )
        win.loc[on, "start_ns"] = active.loc[win.loc[on, "rank"], "start_ns"].to_numpy()
        win.loc[on, "end_ns"] = active.loc[win.loc[on, "rank"], "end_ns"].to_numpy()
    win["step"] = 0
    if len(device):
        warnings.append(
            "no ProfilerStep#N markers: each rank's device-active window (its first to its last GPU "
            "activity) is analysed as one step; the host time before the first kernel "
            f"(up to {lead / 1e6:.1f} ms, start-up) is left out"
        )
    else:
        warnings.append(
            "no ProfilerStep#N markers: each rank's whole trace window is treated as one step"
        )
    return win


def _step_id(digits: str) -> int:
    """The exact N of ``ProfilerStep#N``; an N no int64 holds is not a step counter but a corrupt trace."""
    if len(digits) > 19 or int(digits) > _INT64_MAX:
        shown = digits if len(digits) <= 24 else digits[:24] + "..."
        raise TraceError(
            f"ProfilerStep#{shown}: the step id does not fit in 64 bits; not a real step marker"
        )
    return int(digits)


def _step_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = df[["rank", "step", "start_ns", "end_ns"]].astype(
        {"rank": np.int32, "step": np.int64, "start_ns": np.int64, "end_ns": np.int64}
    )
    return out.sort_values(["rank", "start_ns"], ignore_index=True)


def _assign_steps(events: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Host events: the step they start in. GPU events: the step of their CPU launch, else by time."""
    out = np.full(len(events), -1, dtype=np.int64)
    rank = events["rank"].to_numpy()
    start = events["start_ns"].to_numpy()
    for r, s in steps.groupby("rank"):
        sel = np.flatnonzero(rank == r)
        st, en, ids = s["start_ns"].to_numpy(), s["end_ns"].to_numpy(), s["step"].to_numpy()
        k = np.searchsorted(st, start[sel], side="right") - 1
        ok = (k >= 0) & (start[sel] < en[np.clip(k, 0, None)])
        out[sel[ok]] = ids[k[ok]]
    kinds = events["kind"].cat.codes.to_numpy()
    corr = events["correlation"].to_numpy()
    runtime = (kinds == KINDS.index("runtime")) & (corr >= 0)
    device_side = np.isin(kinds, [KINDS.index(k) for k in ("kernel", "memcpy", "memset")]) & (
        corr >= 0
    )
    if runtime.any() and device_side.any():
        # Per rank, each device event takes the step of the first launch with its correlation id: integer keys
        # throughout (sorted unique ids and a search), so ids beyond 2**53 stay distinct.
        for r in np.unique(rank[device_side]):
            launch_rows = np.flatnonzero(runtime & (rank == r))
            if not launch_rows.size:
                continue
            ids, first = np.unique(
                corr[launch_rows], return_index=True
            )  # first: each id's first launch
            rows = np.flatnonzero(device_side & (rank == r))
            pos = np.minimum(np.searchsorted(ids, corr[rows]), ids.size - 1)
            has = ids[pos] == corr[rows]
            out[rows[has]] = out[launch_rows[first[pos[has]]]]
    return out
