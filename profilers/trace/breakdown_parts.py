"""The pieces of a breakdown besides the step attribution: event masks, kernel and op tables, sync counts,
memory peak, host launch statistics, CPU matmul precision and per-rank times (the straggler is judged from these by
:mod:`profilers.jobs.straggler`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from profilers.trace import kernel_classes as kc
from profilers.trace.intervals import Intervals
from profilers.trace.events import KINDS, Trace

_K = {k: i for i, k in enumerate(KINDS)}
_STEP_MARK = re.compile(r"^ProfilerStep#")


def _kind(ev: pd.DataFrame, *kinds: str) -> np.ndarray:
    """The rows of any of ``kinds``: a look-up by kind code (~0.1 ms on 123k rows, where ``np.isin`` took ~1 ms,
    and the breakdown asks ~20 times). A missing kind (code -1) reads the table's last entry, which is False."""
    wanted = np.zeros(len(KINDS) + 1, dtype=bool)
    wanted[[_K[k] for k in kinds]] = True
    return wanted[_codes(ev, "kind")[0]]


def _by_name(ev: pd.DataFrame, pattern: re.Pattern[str]) -> np.ndarray:
    codes, masks = _codes(ev, "name")
    mask = masks.get(pattern)
    if mask is None:
        mask = masks[pattern] = kc.name_mask(ev["name"].cat.categories, pattern)
    return mask[codes]


# The last frame's categorical columns looked at: (the Categorical itself, its codes, each pattern's mask over its
# categories). A breakdown asks ~20 times for the kinds and ~25 times for name patterns of one frame: pandas'
# accessors and the per-name regex searches cost ~8 ms of its ~50 ms on the 216k-event trace when repeated. The
# Categorical is held, so an identity check cannot mistake another frame's column for it.
_MEMO: dict[str, tuple[object, np.ndarray, dict[re.Pattern[str], np.ndarray]]] = {}


def _codes(ev: pd.DataFrame, column: str) -> tuple[np.ndarray, dict[re.Pattern[str], np.ndarray]]:
    values = ev[column].array
    hit = _MEMO.get(column)
    if hit is None or hit[0] is not values:
        hit = _MEMO[column] = (values, np.asarray(values.codes), {})
    return hit[1], hit[2]


def gpu_ranks(ev: pd.DataFrame) -> set[int]:
    gpu = _kind(ev, "kernel", "memcpy", "memset")
    return set(np.unique(ev["rank"].to_numpy()[gpu]).tolist())


#: The host event sets that are work (what a collective can hide under), as opposed to communication.
HOST_WORK = ("dataloader", "optimizer", "backward", "forward")


def category_masks(ev: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row masks of the event sets each category is built from (overlaps resolved later by priority).

    The ``HOST_WORK`` masks still hold the communication ops (``c10d::allreduce_`` is a ``cpu_op`` too) and
    the ops that enclose them: :func:`host_work_sets` takes their time out, thread by thread."""
    kernel = _kind(ev, "kernel")
    comm_kernel = kernel & _by_name(ev, kc.COMM_KERNEL)
    host_op = _kind(ev, "cpu_op")
    annotated = _kind(ev, "cpu_op", "user_annotation", "python_function")
    not_step = ~_by_name(ev, _STEP_MARK)
    annotation = _kind(ev, "user_annotation")
    return {
        "gpu_compute": kernel & ~comm_kernel,
        "gpu_memcpy": _kind(ev, "memcpy"),
        "gpu_memset": _kind(ev, "memset"),
        "comm_kernel": comm_kernel,
        "comm_op": _kind(ev, "cpu_op", "user_annotation") & _by_name(ev, kc.COMM_OP),
        "dataloader": annotated & _by_name(ev, kc.DATALOADER),
        "host_runtime": _kind(ev, "runtime"),
        "optimizer": _kind(ev, "cpu_op", "user_annotation") & _by_name(ev, kc.OPTIMIZER),
        "backward": host_op & _by_name(ev, kc.BACKWARD),
        "forward": host_op & not_step,
        "phase_data": annotation & _by_name(ev, kc.DATA_PHASE),
        "phase_optimizer": annotation & _by_name(ev, kc.OPTIMIZER_PHASE),
        "phase_backward": annotation & _by_name(ev, kc.BACKWARD),
        "phase_forward": annotation & not_step & _by_name(ev, kc.FORWARD_PHASE),
        "closure": annotation & _by_name(ev, kc.CLOSURE),
    }


def host_work_sets(
    ev: pd.DataFrame, sel: np.ndarray, masks: dict[str, np.ndarray]
) -> dict[str, Intervals]:
    """The ``HOST_WORK`` sets of the rows ``sel``, without the time their own thread (pid, tid) spends inside a
    communication op: a ``c10d::barrier`` or an all-reduce waited on inside ``Optimizer.step`` or a backward op
    is communication, not work; a collective on another thread stays hidden under this thread's work."""
    rows = np.flatnonzero(sel)
    starts, ends = ev["start_ns"].to_numpy()[rows], ev["end_ns"].to_numpy()[rows]
    comm = masks["comm_op"][rows]
    if not comm.any():
        return {
            key: Intervals.of(starts[masks[key][rows]], ends[masks[key][rows]]) for key in HOST_WORK
        }
    thread = _thread_ids(ev["pid"].to_numpy()[rows], ev["tid"].cat.codes.to_numpy()[rows])
    comm_threads = np.unique(thread[comm])
    on_thread = {int(t): thread == t for t in comm_threads}
    in_comm = {t: Intervals.of(starts[comm & on], ends[comm & on]) for t, on in on_thread.items()}
    elsewhere = ~np.isin(thread, comm_threads)
    out: dict[str, Intervals] = {}
    for key in HOST_WORK:
        m = masks[key][rows]
        if not m.any():
            out[key] = Intervals.empty()
            continue
        got = Intervals.of(starts[m & elsewhere], ends[m & elsewhere])
        for t, busy in in_comm.items():
            on = m & on_thread[t]
            if on.any():
                got = got | (Intervals.of(starts[on], ends[on]) - busy)
        out[key] = got
    return out


def _thread_ids(pid: np.ndarray, tid_code: np.ndarray) -> np.ndarray:
    """A dense id per distinct (pid, tid) pair, from integer arrays (a pandas MultiIndex factorize of the same
    pairs took 0.27 s of a 0.52 s breakdown on 0.4 M host events)."""
    pid_code, _ = pd.factorize(pid)
    key = pid_code.astype(np.int64) * (int(tid_code.max(initial=0)) + 2) + (
        tid_code.astype(np.int64) + 1
    )
    return pd.factorize(key)[0]


def compiled_spans(ev: pd.DataFrame, in_step: np.ndarray) -> int:
    """Host spans (operators, annotations, Python) of torch.compile'd code inside steps."""
    host = _kind(ev, "cpu_op", "user_annotation", "python_function")
    return int((host & in_step & _by_name(ev, kc.COMPILED_REGION)).sum())


def optimizer_classes(ev: pd.DataFrame, in_step: np.ndarray) -> tuple[str, ...]:
    """Optimizer classes whose ``Optimizer.step#<Class>.step`` span (torch.optim's own profiler annotation)
    falls inside steps, most frequent first."""
    return tuple(name for name, _ in optimizer_counts(ev, in_step))


def optimizer_counts(ev: pd.DataFrame, in_step: np.ndarray) -> list[tuple[str, int]]:
    """``(class, spans)`` of :func:`optimizer_classes`, most frequent first (what a many-rank reduce adds up)."""
    spans = ev.loc[
        _kind(ev, "user_annotation", "cpu_op") & in_step & _by_name(ev, kc.OPTIMIZER_STEP), "name"
    ]
    if spans.empty:
        return []
    names = spans.astype(str).str.extract(kc.OPTIMIZER_STEP, expand=False).dropna()
    return [(str(n), int(c)) for n, c in names.value_counts().items()]


def kernel_table(ev: pd.DataFrame, in_step: np.ndarray) -> pd.DataFrame:
    sel = _kind(ev, "kernel") & in_step
    if not sel.any():
        return pd.DataFrame(
            columns=["name", "kclass", "count", "total_ns", "mean_us", "low_precision"]
        )
    g = _name_totals(ev, sel)
    names = g["name"]
    g["kclass"] = [kc.classify_kernel(n) for n in names]
    g["low_precision"] = [bool(kc.LOW_PRECISION_KERNEL.search(n)) for n in names]
    g["mean_us"] = g["total_ns"] / g["count"] / 1e3
    return g.sort_values("total_ns", ascending=False, ignore_index=True)[
        ["name", "kclass", "count", "total_ns", "mean_us", "low_precision"]
    ]


def _name_totals(ev: pd.DataFrame, sel: np.ndarray) -> pd.DataFrame:
    """``name`` (str), ``count``, ``total_ns`` (int64) of the rows ``sel`` by event name, one row per name present,
    in the names' category order: what ``groupby("name", observed=True)["dur_ns"].agg(["count", "sum"])`` gives,
    from the codes (a sort and one ``reduceat``; the groupby cost ~3 ms of pandas machinery per table)."""
    codes = _codes(ev, "name")[0][sel]
    durs = ev["dur_ns"].to_numpy()[sel]
    order = np.argsort(codes, kind="stable")
    codes, durs = codes[order], durs[order]
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    categories = ev["name"].cat.categories
    return pd.DataFrame(
        {
            "name": [str(categories[c]) for c in codes[starts]],
            "count": np.diff(np.append(starts, codes.size)).astype(np.int64),
            "total_ns": np.add.reduceat(durs.astype(np.int64, copy=False), starts),
        }
    )


def kernel_class_ns(ev: pd.DataFrame, kernels: pd.DataFrame, in_step: np.ndarray) -> dict[str, int]:
    out = {c: 0 for c in kc.KERNEL_CLASSES}
    for kclass, total in kernels.groupby("kclass")["total_ns"].sum().items():
        out[str(kclass)] = int(total)
    out["memory"] = int(ev.loc[_kind(ev, "memcpy", "memset") & in_step, "dur_ns"].sum())
    return out


def op_table(ev: pd.DataFrame, in_step: np.ndarray) -> pd.DataFrame:
    sel = _kind(ev, "cpu_op") & in_step & ~_by_name(ev, _STEP_MARK)
    if not sel.any():
        return pd.DataFrame(columns=["name", "count", "total_ns", "mean_us"])
    g = _name_totals(ev, sel)
    g["mean_us"] = g["total_ns"] / g["count"] / 1e3
    return g.sort_values("total_ns", ascending=False, ignore_index=True)


@dataclass(frozen=True)
class SyncCounts:
    """Host<->device synchronisations and allocator calls inside steps, per (rank, step) on average."""

    stream_sync: float
    device_sync: float
    event_sync: float
    item: float  # aten::_local_scalar_dense / aten::item: a .item() or bool(tensor) on a device tensor
    malloc_free: float  # cudaMalloc/cudaFree/hipMalloc/hipFree: allocator churn
    pageable_copy_ns: int  # host->device copies from pageable (unpinned) memory
    pinned_copy_ns: int

    @property
    def total_syncs(self) -> float:
        return self.stream_sync + self.device_sync + self.event_sync + self.item


_SYNC = {
    "stream_sync": re.compile(r"^(cuda|hip)StreamSynchronize$"),
    "device_sync": re.compile(r"^(cuda|hip)DeviceSynchronize$"),
    "event_sync": re.compile(r"^(cuda|hip)EventSynchronize$"),
    "malloc_free": re.compile(r"^(cuda|hip)(Malloc|Free)(Async)?$"),
}


_ITEM = re.compile(r"^aten::(_local_scalar_dense|item)$")
_SCALAR_DENSE = re.compile(r"_local_scalar_dense")
_PAGEABLE = re.compile(r"pageable", re.IGNORECASE)
_PINNED = re.compile(r"pinned", re.IGNORECASE)
_LAUNCH = re.compile(r"Launch", re.IGNORECASE)


def sync_counts(ev: pd.DataFrame, in_step: np.ndarray, n_rows: int) -> SyncCounts:
    runtime = _kind(ev, "runtime") & in_step
    counts = {k: float((runtime & _by_name(ev, p)).sum()) / n_rows for k, p in _SYNC.items()}
    item = _kind(ev, "cpu_op") & in_step & _by_name(ev, _ITEM)
    copies = _kind(ev, "memcpy") & in_step
    pageable = copies & _by_name(ev, _PAGEABLE)
    pinned = copies & _by_name(ev, _PINNED)
    # .item() shows up as both aten::item and its child _local_scalar_dense: count the child only when present.
    n_item = float((item & _by_name(ev, _SCALAR_DENSE)).sum()) or float(item.sum())
    return SyncCounts(
        stream_sync=counts["stream_sync"],
        device_sync=counts["device_sync"],
        event_sync=counts["event_sync"],
        item=n_item / n_rows,
        malloc_free=counts["malloc_free"],
        pageable_copy_ns=int(ev.loc[pageable, "dur_ns"].sum()),
        pinned_copy_ns=int(ev.loc[pinned, "dur_ns"].sum()),
    )


@dataclass(frozen=True)
class MemoryPeak:
    """Peak memory from ``[memory]`` events: device (CUDA/HIP) and host, against device capacity."""

    device_allocated_bytes: int | None
    device_reserved_bytes: int | None
    device_capacity_bytes: int | None
    host_allocated_bytes: int | None

    @property
    def device_peak_share(self) -> float | None:
        peak = max(self.device_allocated_bytes or 0, self.device_reserved_bytes or 0)
        if not peak or not self.device_capacity_bytes:
            return None
        return peak / self.device_capacity_bytes


def memory_peak(trace: Trace) -> MemoryPeak:
    m = trace.memory
    if m is None or m.empty:
        return MemoryPeak(None, None, trace.total_device_memory, None)
    dev = m[m["device_type"] != 0]
    host = m[m["device_type"] == 0]
    return MemoryPeak(
        device_allocated_bytes=int(dev["total_allocated"].max()) if len(dev) else None,
        device_reserved_bytes=int(dev["total_reserved"].max()) if len(dev) else None,
        device_capacity_bytes=trace.total_device_memory,
        host_allocated_bytes=int(host["total_allocated"].max()) if len(host) else None,
    )


@dataclass(frozen=True)
class HostStats:
    """How the host feeds the device: launches per step and the typical kernel length."""

    kernels_per_step: float
    median_kernel_us: float
    launch_ns_per_step: float  # time in cudaLaunchKernel-like runtime calls


def host_stats(ev: pd.DataFrame, in_step: np.ndarray, n_rows: int) -> HostStats:
    kern = _kind(ev, "kernel") & in_step
    launches = _kind(ev, "runtime") & in_step & _by_name(ev, _LAUNCH)
    durs = ev.loc[kern, "dur_ns"].to_numpy()
    return HostStats(
        kernels_per_step=float(kern.sum()) / n_rows,
        median_kernel_us=float(np.median(durs)) / 1e3 if durs.size else 0.0,
        launch_ns_per_step=float(ev.loc[launches, "dur_ns"].sum()) / n_rows,
    )


@dataclass(frozen=True)
class CpuMatmul:
    """Host matmul/conv operators inside steps, by input precision (from record_shapes input types)."""

    total_ns: int
    fp32_ns: int
    low_precision_ns: int  # bf16 / fp16 inputs
    unknown_ns: int  # no input types recorded


def cpu_matmul(ev: pd.DataFrame, in_step: np.ndarray) -> CpuMatmul:
    sel = _kind(ev, "cpu_op") & in_step & _by_name(ev, kc.MATMUL_OP)
    # Inclusive times: keep only the outermost matmul op of a nest (linear -> addmm) by taking leaves by name.
    leaf = sel & _by_name(ev, _MATMUL_LEAF)
    rows = leaf if leaf.any() else sel
    durs = ev["dur_ns"].to_numpy()[rows]
    # The precision of each distinct input type once, then per row by its code.
    types = [str(t).lower() for t in ev["dtype"].cat.categories]
    codes = ev["dtype"].cat.codes.to_numpy()[rows]
    low = np.array([bool(_LOW_PRECISION_TYPE.search(t)) for t in types] + [False], dtype=bool)[
        codes
    ]
    fp32 = np.array([t in ("float", "c10::float") for t in types] + [False], dtype=bool)[codes]
    return CpuMatmul(
        int(durs.sum()), int(durs[fp32].sum()), int(durs[low].sum()), int(durs[~low & ~fp32].sum())
    )


# The leaf matmul/conv ops (what linear, matmul and conv call), and the input types that are reduced precision.
_MATMUL_LEAF = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|mkldnn_convolution|convolution_overrideable|_convolution|"
    r"addmv|mv)\Z"
)
_LOW_PRECISION_TYPE = re.compile(r"bfloat16|half|float16")


RANK_COLUMNS = ["rank", "steps", "step_ms", "work_ms", "exposed_comm_ms"]


def rank_table(per_step: pd.DataFrame) -> pd.DataFrame:
    """One row per rank (``RANK_COLUMNS``): steps, median step time, median work (step minus exposed
    communication) and median exposed communication, in ms."""
    if per_step.empty:
        return pd.DataFrame(columns=RANK_COLUMNS)
    g = per_step.assign(work=per_step["step_ns"] - per_step["communication"]).groupby("rank")
    return pd.DataFrame(
        {
            "steps": g.size(),
            "step_ms": g["step_ns"].median() / 1e6,
            "work_ms": g["work"].median() / 1e6,
            "exposed_comm_ms": g["communication"].median() / 1e6,
        }
    ).reset_index()
