"""Per rank, the facts a many-rank reduce needs beyond the breakdown: each collective's total and exposed time,
and the DataLoader spans (:func:`loader_spans`, which ``advisors.loader_facts`` reads too).

A collective's *exposed* time is the part of it no work hides: on a GPU rank the collective kernels not under a
compute kernel, copy or set; on a CPU rank the collective ops not under the host work sets (the breakdown's own
definition, :mod:`profilers.trace.breakdown`), inside steps. Summed over names, exposed time can exceed the
breakdown's ``communication`` category where two collectives overlap each other (each is exposed on its own).
"""

from __future__ import annotations

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
    sel = ev["kind"].isin(HOST_KINDS).to_numpy() & kc.name_mask(names, kc.DATALOADER)[codes] \
        & (ev["step"].to_numpy() >= 0)
    spans = ev.loc[sel, ["rank", "start_ns", "end_ns"]]
    total = sum(Intervals.of(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)).total
                for _, g in spans.groupby("rank"))
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
    work = sets["gpu_compute"] | sets["gpu_memcpy"] | sets["gpu_memset"] if on_gpu else \
        sets["dataloader"] | sets["optimizer"] | sets["backward"] | sets["forward"]
    steps = Intervals.of(trace.steps["start_ns"].to_numpy(), trace.steps["end_ns"].to_numpy())
    sub = ev.loc[comm, ["name", "start_ns", "end_ns"]]
    rows = []
    for name, g in sub.groupby(sub["name"].astype(str), sort=True):
        spans = Intervals.of(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)) & steps
        rows.append([str(name), int(len(g)), int(spans.total), int((spans - work).total)])
    return sorted(rows, key=lambda r: -r[2])
