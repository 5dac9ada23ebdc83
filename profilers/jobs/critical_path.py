"""The critical path of one step of one rank: the chain of dependent work that sets the step's time.

The graph (:mod:`profilers.jobs.critical_graph`) ties every host operator, launch, kernel, stream and
synchronisation of the step together; every edge runs forward in time, so every path from the step's start to
its end takes the step's whole time. The critical path is the one made of the most *work* (operators' and
kernels' own time), i.e. the fewest waits: where the host blocks in ``cudaStreamSynchronize``, the path goes
through the kernels it waited for; where the device idles, through the host that launched late. It is the
longest path of the graph with waits weighing nothing (Holistic Trace Analysis' critical path analysis weighs
its edges so too), found in linear time in topological order.

The result (:class:`CriticalPath`) is small and plain: the path's time split by kind (``cpu_op``,
``gpu_compute``, ``gpu_memory``, ``gpu_communication``, ``launch_wait``, ``sync_wait``, ``idle``; the kinds add up
to the path's time), the host time by top-level operator, and the items longest on it. It is computed once per
rank trace, in the map (:mod:`profilers.jobs.rank_summary`), for the rank's median step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from profilers.jobs.critical_graph import HAND_OFF, KINDS, WORK, StepGraph, step_graph
from profilers.trace.events import Trace

TOP_ITEMS = 10
TOP_OPS = 8


@dataclass(frozen=True)
class CriticalPath:
    """One step's critical path on one rank. Times in ms; ``by_kind`` adds up to ``total_ms``."""

    rank: int
    step: int
    step_ms: float  # the step's span (its ProfilerStep, or its inferred window)
    total_ms: float  # the path's time, from the step's start to its end
    work_ms: float  # of which operators' and kernels' own time (the path's weight)
    by_kind: tuple[tuple[str, float], ...]  # (kind, ms), largest first
    cpu_ops: tuple[
        tuple[str, float], ...
    ]  # host time on the path by top-level operator, largest first
    top: tuple[tuple[str, str, float], ...]  # (kind, name, ms): the longest items on the path
    nodes: int
    edges: int
    dropped_edges: int  # edges left out of the graph: they ran backwards in time (clock skew)

    def to_json(self) -> dict[str, Any]:
        total = self.total_ms or 1.0
        return {
            "rank": self.rank,
            "step": self.step,
            "step_ms": self.step_ms,
            "total_ms": self.total_ms,
            "work_ms": self.work_ms,
            "by_kind": [
                {"kind": k, "ms": ms, "share": round(ms / total, 4)} for k, ms in self.by_kind
            ],
            "cpu_ops": [{"name": n, "ms": ms} for n, ms in self.cpu_ops],
            "top": [{"kind": k, "name": n, "ms": ms} for k, n, ms in self.top],
            "graph": {
                "nodes": self.nodes,
                "edges": self.edges,
                "dropped_edges": self.dropped_edges,
            },
        }


def longest_path(g: StepGraph) -> np.ndarray | None:
    """The edges (indices into ``g``'s edge arrays) of the path from ``g.source`` to ``g.sink`` of most work, in
    order; None when the sink cannot be reached. Kahn's topological order, relaxing each node's out-edges once;
    ties keep the first edge found (a hand-off to another thread loses a tie). Nodes on a cycle (of equal times
    only) are never released: unreachable."""
    n = len(g.time)
    order = np.argsort(g.src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(g.src, minlength=n), out=ptr[1:])
    dst_l = g.dst[order].tolist()
    dt = g.time[g.dst] - g.time[g.src]
    weight = np.where(WORK[g.kind], dt, 0)
    if (
        HAND_OFF in g.labels
    ):  # a thread hand-off costs 1 ns: between paths of equal work, the step's own thread
        weight[g.label == g.labels.index(HAND_OFF)] -= 1
    w_l = weight[order].tolist()
    ptr_l = ptr.tolist()
    indeg = np.bincount(g.dst, minlength=n).tolist()
    neg = -(1 << 62)
    dist = [neg] * n
    pred = [-1] * n
    dist[g.source] = 0
    ready = [v for v in range(n) if indeg[v] == 0]
    while ready:
        u = ready.pop()
        du = dist[u]
        for k in range(ptr_l[u], ptr_l[u + 1]):
            v = dst_l[k]
            if du > neg:
                c = du + w_l[k]
                if c > dist[v]:
                    dist[v], pred[v] = c, k
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if dist[g.sink] == neg:
        return None
    path: list[int] = []
    v = g.sink
    while v != g.source:
        k = pred[v]
        path.append(int(order[k]))
        v = int(g.src[order[k]])
    return np.array(path[::-1], np.int64)


def critical_path(
    trace: Trace, step: int | None = None, rank: int | None = None
) -> CriticalPath | None:
    """The critical path of one step (``step``, else the step of median time) of a one-rank ``trace``, or of
    ``rank``'s steps in a trace of several; None when it has no step or its step's end cannot be reached from its
    start."""
    steps = trace.steps if rank is None else trace.steps[trace.steps["rank"].to_numpy() == rank]
    if steps.empty:
        return None
    if step is None:
        by_time = steps.assign(span=steps["end_ns"] - steps["start_ns"]).sort_values(
            ["span", "start_ns"], kind="stable"
        )
        row = by_time.iloc[(len(by_time) - 1) // 2]
    else:
        match = steps[steps["step"] == step]
        if match.empty:
            return None
        row = match.iloc[0]
    rank, step_id = int(row["rank"]), int(row["step"])
    start, end = int(row["start_ns"]), int(row["end_ns"])
    ev = trace.events
    ev = ev[ev["rank"].to_numpy() == rank]
    marker = None if trace.steps_inferred else f"ProfilerStep#{step_id}"
    g = step_graph(ev, start, end, marker)
    path = longest_path(g)
    if path is None:
        return None
    return summarise(g, path, rank, step_id, end - start)


def summarise(g: StepGraph, path: np.ndarray, rank: int, step: int, span_ns: int) -> CriticalPath:
    """The path's time by kind, host time by top-level operator, and its longest items."""
    dt = (g.time[g.dst[path]] - g.time[g.src[path]]).astype(np.int64)
    kinds, labels = g.kind[path], g.label[path]
    by_kind: dict[str, int] = {}
    items: dict[tuple[int, int], int] = {}
    for k, lab, d in zip(kinds.tolist(), labels.tolist(), dt.tolist()):
        by_kind[KINDS[k]] = by_kind.get(KINDS[k], 0) + d
        items[(k, lab)] = items.get((k, lab), 0) + d

    def ms(ns: int) -> float:
        return round(ns / 1e6, 4)

    ranked = sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))
    ops = [(g.labels[lab], ms(d)) for (k, lab), d in ranked if KINDS[k] == "cpu_op"][:TOP_OPS]
    top = [(KINDS[k], g.labels[lab], ms(d)) for (k, lab), d in ranked if d > 0][:TOP_ITEMS]
    return CriticalPath(
        rank=rank,
        step=step,
        step_ms=ms(span_ns),
        total_ms=ms(int(dt.sum())),
        work_ms=ms(int(dt[WORK[kinds]].sum())),
        by_kind=tuple(
            (k, ms(v)) for k, v in sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        cpu_ops=tuple(ops),
        top=tuple(top),
        nodes=len(g.time),
        edges=len(g.src),
        dropped_edges=g.dropped,
    )


def job_critical_path(
    summaries: Sequence[dict[str, Any]], ranks: Sequence[int], rank: int
) -> dict[str, Any]:
    """``job.critical_path``: the critical path the map found in ``rank``'s trace (its summary's
    ``critical_path``), under the job's rank and file; or, where that rank's summary holds none, why not (the
    straggler's ``extra_work``, read from the summaries alone, is then the view of its longer step)."""
    for s, r in zip(summaries, ranks):
        if int(r) == rank:
            return path_json(s.get("critical_path"), rank, str(s["file"]))
    return unavailable(rank, None, f"needs rank {rank}'s trace")


def path_json(found: dict[str, Any] | None, rank: int, file: str) -> dict[str, Any]:
    """A rank's path as the job reports it (:meth:`CriticalPath.to_json` under the job's rank and file)."""
    if not found:
        return unavailable(
            rank,
            file,
            f"rank {rank}'s trace has no step whose end its start reaches in the dependency graph",
        )
    return {**found, "rank": rank, "file": file, "available": True}


def unavailable(rank: int, file: str | None, reason: str) -> dict[str, Any]:
    return {"rank": rank, "file": file, "available": False, "reason": reason}
