"""Per rank, the facts a many-rank reduce needs beyond the breakdown: each collective's total and exposed time,
its message sizes (:func:`collective_sizes`), and the DataLoader spans (:func:`loader_spans`, which ``advisors.loader_facts`` reads too).

A collective's *exposed* time is the part of it no work hides: on a GPU rank the collective kernels not under a
compute kernel, copy or set; on a CPU rank the collective ops not under the host work sets (the breakdown's own
definition, :mod:`profilers.trace.breakdown`), inside steps. Summed over names, exposed time can exceed the
breakdown's ``communication`` category where two collectives overlap each other (each is exposed on its own).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from profilers.trace import breakdown_parts as parts
from profilers.trace import kernel_classes as kc
from profilers.trace.events import Trace
from profilers.trace.intervals import Intervals

HOST_KINDS = ("cpu_op", "user_annotation", "python_function")


def loader_spans(trace: Trace) -> tuple[int, list[str]]:
    """DataLoader time inside steps (the union of its spans of any host kind per rank, summed over ranks) and the
    distinct span names found."""
    ev = trace.events
    # Names are matched once per distinct name (the categories), not once per event: 126k regex searches took
    # 0.2 s of a 216k-event trace's analysis.
    names = ev["name"].cat.categories
    codes = ev["name"].cat.codes.to_numpy()
    sel = (
        ev["kind"].isin(HOST_KINDS).to_numpy()
        & kc.name_mask(names, kc.DATALOADER)[codes]
        & (ev["step"].to_numpy() >= 0)
    )
    spans = ev.loc[sel, ["rank", "start_ns", "end_ns"]]
    total = sum(
        Intervals.of(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)).total
        for _, g in spans.groupby("rank")
    )
    return int(total), [str(n) for n in names[np.unique(codes[sel])]]


def collective_rows(trace: Trace, on_gpu: bool) -> list[list[Any]]:
    """``[name, count, total_ns, exposed_ns]`` per collective name on a one-rank trace, inside steps, largest
    total first."""
    from profilers.trace.breakdown import event_sets

    ev = trace.events
    if ev.empty or trace.steps.empty:
        return []
    rank = int(trace.ranks[0])
    masks = parts.category_masks(ev)
    comm = masks["comm_kernel"] if on_gpu else masks["comm_op"]
    comm = comm & (ev["step"].to_numpy() >= 0)
    if not comm.any():
        return []
    sets = event_sets(trace, rank, masks)
    work = (
        sets["gpu_compute"] | sets["gpu_memcpy"] | sets["gpu_memset"]
        if on_gpu
        else sets["dataloader"] | sets["optimizer"] | sets["backward"] | sets["forward"]
    )
    steps = Intervals.of(trace.steps["start_ns"].to_numpy(), trace.steps["end_ns"].to_numpy())
    sub = ev.loc[comm, ["name", "start_ns", "end_ns"]]
    rows = []
    for name, g in sub.groupby(sub["name"].astype(str), sort=True):
        spans = (
            Intervals.of(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)) & steps
        )
        rows.append([str(name), int(len(g)), int(spans.total), int((spans - work).total)])
    return sorted(rows, key=lambda r: -r[2])


#: Bytes per element of record_shapes' ``Input type`` names.
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "int": 4,
    "long int": 8,
    "short int": 2,
    "unsigned char": 1,
    "signed char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::complex<float>": 8,
}
_HOST_COLLECTIVE = re.compile(r"^(?:nccl|gloo|mpi|ucc|xccl):(\w+)$|^c10d::(\w+?)_?$")
_KERNEL_KIND = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)


def collective_kind(name: str) -> str | None:
    """``nccl:all_reduce``, ``gloo:all_reduce``, ``c10d::allreduce_``, ``ncclKernel_AllReduce_RING_LL_Sum_float``
    → ``allreduce``; ``None`` for a name that is no collective."""
    m = _HOST_COLLECTIVE.match(name)
    word = (m.group(1) or m.group(2)) if m else None
    if word is None and (k := _KERNEL_KIND.search(name)):
        word = k.group(1)
    return None if word is None else word.replace("_", "").lower()


def _first_tensor_elements(shapes: str) -> int | None:
    """Elements of the first input of a record_shapes ``Input Dims`` text ("[[19618307]]" → 19618307)."""
    try:
        dims = json.loads(shapes)
    except ValueError:
        return None
    first = dims[0] if isinstance(dims, list) and dims else None
    if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
        return None
    return int(np.prod(first)) if first else 1


def collective_sizes(trace: Trace) -> list[list[Any]]:
    """``[kind, calls, sized_calls, bytes]`` per collective kind on a one-rank trace, inside steps: the message
    size of a call is its first input tensor (record_shapes' ``Input Dims`` × ``Input type``) on the host-side
    ``nccl:``/``gloo:``/``c10d::`` op. Calls without shapes (a trace profiled without ``record_shapes``, or
    torch's older NCCL annotations) are counted but not sized: ``sized_calls`` says how many were."""
    ev = trace.events
    if ev.empty:
        return []
    host = ev["kind"].isin(HOST_KINDS).to_numpy() & (ev["step"].to_numpy() >= 0)
    names = ev["name"].cat.categories
    kinds = {i: collective_kind(str(n)) for i, n in enumerate(names)}
    if any(k is not None and not str(names[i]).startswith("c10d::") for i, k in kinds.items()):
        # torch names a call twice (c10d::allreduce_ around nccl:all_reduce): count the backend's own op once
        kinds = {i: None if str(names[i]).startswith("c10d::") else k for i, k in kinds.items()}
    codes = ev["name"].cat.codes.to_numpy()
    is_coll = np.fromiter((kinds.get(int(c)) is not None for c in codes), bool, len(codes)) & host
    out: dict[str, list[int]] = {}
    cols = [c for c in ("shapes", "dtype") if c in ev.columns]
    for code, shapes, dtype in (
        zip(codes[is_coll], *(ev.loc[is_coll, c].astype(str) for c in cols))
        if len(cols) == 2
        else ((c, "", "") for c in codes[is_coll])
    ):
        kind = kinds[int(code)]
        assert kind is not None
        row = out.setdefault(kind, [0, 0, 0])
        row[0] += 1
        n = _first_tensor_elements(shapes) if shapes else None
        size = DTYPE_BYTES.get(dtype)
        if n is not None and size is not None:
            row[1] += 1
            row[2] += n * size
    return sorted(([k, *v] for k, v in out.items()), key=lambda r: -r[3])
