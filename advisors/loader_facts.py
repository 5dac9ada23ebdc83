"""DataLoader facts read straight from a trace: how long ``next(iter(loader))`` ran, and in which iterator.

The breakdown's op table holds ``cpu_op`` events only, while many traces record the loader's
``enumerate(DataLoader)#…__next__`` span as a ``user_annotation`` (or a Python function). This reads every
host kind, keeps spans inside steps, and takes their union per rank, so nested spans count once.
"""

from __future__ import annotations

from dataclasses import dataclass

from profilers.jobs.collectives import HOST_KINDS, loader_spans  # noqa: F401  (HOST_KINDS: re-exported)
from profilers.trace.events import Trace

SINGLE_PROCESS, MULTI_PROCESS = "_SingleProcessDataLoaderIter", "_MultiProcessingDataLoaderIter"


@dataclass(frozen=True)
class LoaderFacts:
    """``total_ns``: DataLoader time inside steps, summed over ranks; ``mode``: single/multi process or None."""

    total_ns: int
    mode: str | None


def loader_facts(trace: Trace) -> LoaderFacts:
    total, found = loader_spans(trace)
    return loader_mode(total, found)


def loader_mode(total_ns: int, found: list[str]) -> LoaderFacts:
    """The facts from the DataLoader time and span names (of one trace, or summed over a job's ranks)."""
    mode = (
        "single_process"
        if any(SINGLE_PROCESS in n for n in found)
        else "multi_process"
        if any(MULTI_PROCESS in n for n in found)
        else None
    )
    return LoaderFacts(total_ns=int(total_ns), mode=mode)
