"""DataLoader facts read straight from a trace: how long ``next(iter(loader))`` ran, and in which iterator.

The breakdown's op table holds ``cpu_op`` events only, while many traces record the loader's
``enumerate(DataLoader)#…__next__`` span as a ``user_annotation`` (or a Python function). This reads every
host kind, keeps spans inside steps, and takes their union per rank, so nested spans count once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profilers.trace import kernel_classes as kc
from profilers.trace.intervals import Intervals
from profilers.trace.events import Trace

HOST_KINDS = ("cpu_op", "user_annotation", "python_function")
SINGLE_PROCESS, MULTI_PROCESS = "_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"


@dataclass(frozen=True)
class LoaderFacts:
    """``total_ns``: DataLoader time inside steps, summed over ranks; ``mode``: single/multi process or None."""

    total_ns: int
    mode: str | None


def loader_facts(trace: Trace) -> LoaderFacts:
    ev = trace.events
    names = ev["name"].astype(str)
    sel = ev["kind"].isin(HOST_KINDS).to_numpy() & names.str.contains(kc.DATALOADER).to_numpy() \
        & (ev["step"].to_numpy() >= 0)
    spans = ev.loc[sel, ["rank", "start_ns", "end_ns"]]
    total = sum(Intervals.of(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)).total
                for _, g in spans.groupby("rank"))
    found = names[sel]
    mode = "single_process" if found.str.contains(SINGLE_PROCESS).any() else \
        "multi_process" if found.str.contains(MULTI_PROCESS).any() else None
    return LoaderFacts(total_ns=int(total), mode=mode)
