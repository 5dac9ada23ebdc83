"""The dependency graph of one step of one rank, built as Holistic Trace Analysis builds its critical-path graph,
from the loaded event columns (:class:`~profilers.trace.events.Trace`; no JSON is read again).

Nodes are the start and the end of every event inside the step's window: host operators, annotations and
runtime calls on every thread of the rank, and the device's kernels, copies and sets. Edges:

* **host chains**: each thread's events nested by time (parent start → child start → child end → next child start
  → … → parent end), an edge between each two consecutive points. Its time belongs to the innermost event open
  between them: an operator's own time (``cpu_op``, counted under its top-level operator), a blocking
  synchronisation's wait (``sync_wait``), or no operator at all (``idle``: Python between operators, a thread
  with nothing recorded);
* **launches**: a runtime call → the kernel, copy or set it launched (the exact correlation id) (``launch_wait``:
  from the call to the kernel's start, the launch latency and the queue);
* **streams**: each kernel → the next on its stream (``idle``: the gap between them) and each kernel's own span
  (``gpu_compute``, ``gpu_memory`` for copies and sets, ``gpu_communication`` for collectives, whose time holds
  their wait for the other ranks);
* **synchronisation**: the last device activity to end inside a blocking call (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, ``cudaMemcpy``…, HIP alike) → that call's end
  (``sync_wait``); and, inferred where the trace keeps no event-wait record, a kernel that started after both its
  launch and its stream predecessor, when a kernel on another stream had just ended (a ``cudaStreamWaitEvent``
  on a collective, typically) → from that kernel (``sync_wait``);
* **threads**: another thread's top-level operator → forked from the step's thread where it starts, and joined
  back where it ends (``idle``), so a backward pass on autograd's own thread can be on the path.

Every edge goes forward in time and its time is the difference of its ends, so any path from the step's start
to its end takes exactly the step's time; edges that would run backwards (clock skew between host and device)
are left out. :mod:`profilers.jobs.critical_path` finds the path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from profilers.trace.kernel_classes import classify_kernel

#: Edge kinds, in the order of :data:`KIND_CODES`. ``cpu_op`` and the device kinds are work; the rest are waits.
KINDS = (
    "cpu_op",
    "gpu_compute",
    "gpu_memory",
    "gpu_communication",
    "launch_wait",
    "sync_wait",
    "idle",
)
CPU_OP, GPU_COMPUTE, GPU_MEMORY, GPU_COMM, LAUNCH, SYNC, IDLE = range(len(KINDS))
WORK = np.array([True, True, True, True, False, False, False])
#: Each kind in words, for every page and report that shows a critical path (never the identifiers above).
KIND_WORDS = {
    "cpu_op": "host operators",
    "gpu_compute": "GPU compute kernels",
    "gpu_memory": "GPU copies and sets",
    "gpu_communication": "GPU collectives",  # their time holds their wait for the other ranks
    "launch_wait": "kernel launch waits",
    "sync_wait": "host waits on the GPU",
    "idle": "idle gaps",  # no operator or kernel running: Python between operators, a stream's gap
}
HOST_KINDS = ("cpu_op", "user_annotation", "runtime")
DEVICE_KINDS = ("kernel", "memcpy", "memset")
BLOCKING = re.compile(
    r"^(cuda|hip)(Device|Stream|Event)Synchronize$|^(cuda|hip)Memcpy(Async)?$|^cuMemcpyDtoH",
    re.IGNORECASE,
)
IDLE_HOST = "host: no operator (Python, untraced)"
IDLE_THREAD = "host: thread between operators"
IDLE_STREAM = "device: stream gap"
HAND_OFF = "host: thread hand-off"


@dataclass(frozen=True)
class StepGraph:
    """A step's graph: node times (ns), edges (``src``, ``dst``, ``kind`` code, ``label`` index into ``labels``),
    and the step's ``source`` and ``sink`` nodes."""

    time: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    label: np.ndarray
    labels: tuple[str, ...]
    source: int
    sink: int
    dropped: int  # edges left out because they ran backwards in time


class _Builder:
    def __init__(self) -> None:
        self.times: list[np.ndarray] = []
        self.n = 0
        self.edges: list[tuple[np.ndarray, ...]] = []
        self.labels: dict[str, int] = {}

    def nodes(self, t: np.ndarray) -> np.ndarray:
        ids = np.arange(self.n, self.n + len(t), dtype=np.int64)
        self.times.append(np.asarray(t, dtype=np.int64))
        self.n += len(t)
        return ids

    def label(self, name: str) -> int:
        return self.labels.setdefault(name, len(self.labels))

    def edge(
        self, src: np.ndarray, dst: np.ndarray, kind: np.ndarray | int, label: np.ndarray | int
    ) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        self.edges.append(
            (
                src,
                dst,
                np.broadcast_to(np.asarray(kind, np.int8), src.shape),
                np.broadcast_to(np.asarray(label, np.int64), src.shape),
            )
        )

    def graph(self, source: int, sink: int) -> StepGraph:
        time = np.concatenate(self.times) if self.times else np.zeros(0, np.int64)
        src, dst, kind, label = (
            np.concatenate([e[i] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
            for i in range(4)
        )
        forward = time[dst] >= time[src]
        return StepGraph(
            time,
            src[forward],
            dst[forward],
            kind[forward].astype(np.int8),
            label[forward],
            tuple(self.labels),
            source,
            sink,
            int((~forward).sum()),
        )


def step_graph(ev: pd.DataFrame, start_ns: int, end_ns: int, marker: str | None) -> StepGraph:
    """The graph of the events of one rank (``ev``: :class:`Trace` columns) inside ``[start_ns, end_ns]``;
    ``marker``: the step's ``ProfilerStep#N`` name (its thread is the step's thread), None for an inferred window."""
    kind = ev["kind"].astype(str).to_numpy()
    st, en = ev["start_ns"].to_numpy(np.int64), ev["end_ns"].to_numpy(np.int64)
    inside = (st >= start_ns) & (en <= end_ns)
    host = np.flatnonzero(inside & np.isin(kind, HOST_KINDS))
    dev = np.flatnonzero(inside & np.isin(kind, DEVICE_KINDS))
    names = [str(n) for n in ev["name"].cat.categories]
    codes = ev["name"].cat.codes.to_numpy()
    blocking_cat = np.fromiter((bool(BLOCKING.search(n)) for n in names), bool, len(names))
    b = _Builder()

    # Host: one nested chain per thread; the step's own thread first.
    thread = pd.factorize(
        pd.MultiIndex.from_arrays(
            [ev["pid"].to_numpy()[host], ev["tid"].cat.codes.to_numpy()[host]]
        )
    )[0]
    is_marker = np.zeros(len(host), bool)
    if marker is not None and marker in names:
        is_marker = (codes[host] == names.index(marker)) & (st[host] == start_ns)
    main = (
        int(thread[np.argmax(is_marker)])
        if is_marker.any()
        else int(np.bincount(thread).argmax())
        if len(host)
        else -1
    )
    start_node = np.full(len(ev), -1, np.int64)
    end_node = np.full(len(ev), -1, np.int64)
    chains: dict[
        int, tuple[np.ndarray, np.ndarray]
    ] = {}  # thread → (its nodes in order, their times)
    tops: dict[int, list[int]] = {}  # thread → its top-level events
    root = int(host[np.argmax(is_marker)]) if is_marker.any() else -1
    is_op = np.isin(kind, ("cpu_op", "runtime"))
    for t in [main] + [t for t in range(int(thread.max()) + 1 if len(host) else 0) if t != main]:
        rows = host[thread == t]
        rows = rows[np.lexsort((-en[rows], st[rows]))]
        chains[t], tops[t] = _chain(
            b, rows, st, en, codes, names, blocking_cat, is_op, root, start_node, end_node
        )

    # Device: each activity's span, its stream's order, its launch.
    d_start = b.nodes(st[dev])
    d_end = b.nodes(en[dev])
    start_node[dev], end_node[dev] = d_start, d_end
    used, inverse = np.unique(codes[dev], return_inverse=True)
    comm = np.array([classify_kernel(names[c]) == "communication" for c in used.tolist()], bool)[
        inverse
    ]
    d_kind = np.where(
        kind[dev] != "kernel", GPU_MEMORY, np.where(comm, GPU_COMM, GPU_COMPUTE)
    ).astype(np.int8)
    b.edge(
        d_start,
        d_end,
        d_kind,
        np.array([b.label(names[c]) for c in used.tolist()], np.int64)[inverse],
    )
    stream_key = (
        ev["device"].to_numpy().astype(np.int64)[dev] * (1 << 32) + ev["stream"].to_numpy()[dev]
    )
    order = np.lexsort((st[dev], stream_key))
    same = stream_key[order][1:] == stream_key[order][:-1]
    prev = np.full(len(dev), -1, np.int64)
    prev[order[1:][same]] = order[:-1][same]
    has_prev = prev >= 0
    b.edge(d_end[prev[has_prev]], d_start[has_prev], IDLE, b.label(IDLE_STREAM))
    corr = ev["correlation"].to_numpy()
    launch_t = np.full(len(dev), np.iinfo(np.int64).min)
    runtime = host[(kind[host] == "runtime") & (corr[host] >= 0)]
    if len(runtime) and len(dev):
        by_corr = pd.Index(corr[runtime]).drop_duplicates(keep="first")
        pos = by_corr.get_indexer(corr[dev])
        linked = (pos >= 0) & (corr[dev] >= 0)
        first = runtime[pd.Index(corr[runtime]).get_indexer(by_corr)]
        launcher = first[pos[linked]]
        b.edge(start_node[launcher], d_start[linked], LAUNCH, b.label("launch"))
        launch_t[linked] = st[launcher]
    _waits(
        b,
        ev,
        host,
        dev,
        st,
        en,
        codes,
        names,
        blocking_cat,
        end_node,
        d_start,
        d_end,
        prev,
        launch_t,
        stream_key,
    )
    _hand_offs(b, chains, tops, main, st, en, start_node, end_node)
    if root >= 0:
        return b.graph(int(start_node[root]), int(end_node[root]))
    return _open_window(b, chains, d_start, d_end, stream_key, start_ns, end_ns)


def _chain(
    b: _Builder,
    rows: np.ndarray,
    st: np.ndarray,
    en: np.ndarray,
    codes: np.ndarray,
    names: list[str],
    blocking_cat: np.ndarray,
    is_op: np.ndarray,
    root: int,
    start_node: np.ndarray,
    end_node: np.ndarray,
) -> tuple[tuple[np.ndarray, np.ndarray], list[int]]:
    """One thread's events (sorted by start, longest first) as a nested chain of start and end points. Time inside
    an operator or runtime call counts under its outermost operator; time inside an annotation (``## forward ##``,
    a ``record_function``) with no operator open is not work: ``idle``, named after the annotation."""
    times: list[int] = []
    events: list[int] = []  # the event each point belongs to
    starts: list[bool] = []
    open_after: list[int] = []  # the innermost event open after each point (-1: none)
    top_of: dict[
        int, int
    ] = {}  # event → its top-level operator (the step's child on the step's thread)
    stack: list[tuple[int, int]] = []  # (event, its end, clamped inside its parent)

    def _point(t: int, event: int, start: bool, open_event: int) -> None:
        times.append(t)
        events.append(event)
        starts.append(start)
        open_after.append(open_event)

    tops: list[int] = []
    for i in rows.tolist():
        s = int(st[i])
        while stack and stack[-1][1] <= s:
            j, e = stack.pop()
            _point(e, j, False, stack[-1][0] if stack else -1)
        e = int(en[i]) if not stack else min(int(en[i]), stack[-1][1])
        parent = stack[-1][0] if stack else -1
        if parent < 0:
            tops.append(i)
        inherited = top_of.get(parent, -1)
        top_of[i] = inherited if inherited >= 0 else (i if is_op[i] else -1)
        _point(s, i, True, i)
        stack.append((i, e))
    while stack:
        j, e = stack.pop()
        _point(e, j, False, stack[-1][0] if stack else -1)
    ids = b.nodes(np.array(times, np.int64))
    ev_arr, is_start = np.array(events, np.int64), np.array(starts, bool)
    start_node[ev_arr[is_start]] = ids[is_start]
    end_node[ev_arr[~is_start]] = ids[~is_start]
    if len(ids) > 1:
        owner = np.array(open_after[:-1], np.int64)
        kinds = np.full(len(owner), CPU_OP, np.int8)
        labels = np.empty(len(owner), np.int64)
        idle_thread, idle_host = b.label(IDLE_THREAD), b.label(IDLE_HOST)
        for k, o in enumerate(owner.tolist()):
            if o < 0:
                kinds[k], labels[k] = IDLE, idle_thread
            elif o == root:
                kinds[k], labels[k] = IDLE, idle_host
            elif blocking_cat[codes[o]]:
                kinds[k], labels[k] = SYNC, b.label(names[codes[o]])
            elif top_of[o] < 0:
                kinds[k], labels[k] = IDLE, b.label(f"{names[codes[o]]}: no operator")
            else:
                labels[k] = b.label(names[codes[top_of[o]]])
        b.edge(ids[:-1], ids[1:], kinds, labels)
    return (ids, np.array(times, np.int64)), tops


def _waits(
    b: _Builder,
    ev: pd.DataFrame,
    host: np.ndarray,
    dev: np.ndarray,
    st: np.ndarray,
    en: np.ndarray,
    codes: np.ndarray,
    names: list[str],
    blocking_cat: np.ndarray,
    end_node: np.ndarray,
    d_start: np.ndarray,
    d_end: np.ndarray,
    prev: np.ndarray,
    launch_t: np.ndarray,
    stream_key: np.ndarray,
) -> None:
    """Synchronisation edges: device → blocking host call, and device → device across streams (inferred)."""
    if not len(dev):
        return
    by_end = np.argsort(en[dev], kind="stable")
    ends = en[dev][by_end]
    blocking = host[blocking_cat[codes[host]]]
    if len(blocking):
        k = np.searchsorted(ends, en[blocking], side="right") - 1
        ok = k >= 0
        ok[ok] = ends[k[ok]] >= st[blocking[ok]]
        waited = by_end[k[ok]]
        b.edge(
            d_end[waited],
            end_node[blocking[ok]],
            SYNC,
            np.array([b.label(names[c]) for c in codes[blocking[ok]].tolist()], np.int64),
        )
    # A kernel that started after its launch and its stream predecessor ended waited for something else: the
    # latest activity on another stream to end before it started, when that ended after both.
    bound = np.maximum(
        launch_t, np.where(prev >= 0, en[dev][np.clip(prev, 0, None)], np.iinfo(np.int64).min)
    )
    k = np.searchsorted(ends, st[dev], side="right") - 1
    other = by_end[np.clip(k, 0, None)]
    ok = (
        (k >= 0)
        & (stream_key[other] != stream_key)
        & (ends[np.clip(k, 0, None)] > bound)
        & (bound > np.iinfo(np.int64).min)
    )
    b.edge(d_end[other[ok]], d_start[ok], SYNC, b.label("device: wait on another stream"))


def _hand_offs(
    b: _Builder,
    chains: dict[int, tuple[np.ndarray, np.ndarray]],
    tops: dict[int, list[int]],
    main: int,
    st: np.ndarray,
    en: np.ndarray,
    start_node: np.ndarray,
    end_node: np.ndarray,
) -> None:
    """Each other thread's top-level event forks from the step's thread where it starts and joins it back where it
    ends (the first point of the step's thread at or after its end, later than the fork)."""
    if main not in chains or not len(chains[main][0]):
        return
    ids, times = chains[main]
    label = b.label(HAND_OFF)
    for t, top in tops.items():
        if t == main or not top:
            continue
        ev = np.array(top, np.int64)
        fork = np.searchsorted(times, st[ev], side="right") - 1
        ok = fork >= 0
        b.edge(ids[fork[ok]], start_node[ev[ok]], IDLE, label)
        join = np.maximum(np.searchsorted(times, en[ev], side="left"), fork + 1)
        ok = join < len(ids)
        b.edge(end_node[ev[ok]], ids[join[ok]], IDLE, label)


def _open_window(
    b: _Builder,
    chains: dict[int, tuple[np.ndarray, np.ndarray]],
    d_start: np.ndarray,
    d_end: np.ndarray,
    stream_key: np.ndarray,
    start_ns: int,
    end_ns: int,
) -> StepGraph:
    """A window with no step marker (its ends are its first and last device activity): a source and a sink of
    its own, tied to each thread's and each stream's first and last point."""
    source, sink = b.nodes(np.array([start_ns, end_ns], np.int64)).tolist()
    label = b.label(IDLE_HOST)
    firsts = [ids[0] for ids, _ in chains.values() if len(ids)]
    lasts = [ids[-1] for ids, _ in chains.values() if len(ids)]
    if len(d_start):
        order = np.argsort(stream_key, kind="stable")  # within a stream, by start (the rows are)
        keys = stream_key[order]
        first = order[np.r_[True, keys[1:] != keys[:-1]]]
        last = order[np.r_[keys[1:] != keys[:-1], True]]
        firsts += d_start[first].tolist()
        lasts += d_end[last].tolist()
    b.edge(np.full(len(firsts), source), np.array(firsts, np.int64), IDLE, label)
    b.edge(np.array(lasts, np.int64), np.full(len(lasts), sink), IDLE, label)
    return b.graph(source, sink)
