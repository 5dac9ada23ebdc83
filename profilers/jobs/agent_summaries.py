"""A run's per-rank summaries written at capture time by the agent (``stepwise_agent.rank_summary``): every rank's
step times and collective time, read without any trace. A run launched with ``--trace-ranks`` has N summaries
and k traces; :func:`run_job_views` gives ``analyze`` the cross-rank views of all N, and the slowest rank's critical
path where that rank's trace is among the k (``--trace-ranks slowest`` keeps it).

Times in the agent's summaries are µs from the profiler; the views are in ms. A rank's *work* is its step minus
the time its collectives ran (on a gloo/CPU rank mostly waiting); the straggler is judged by the one rule of
:mod:`profilers.jobs.straggler`, its victims the ranks whose collectives ran longer than its own by at least half
its extra work.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from profilers.jobs.straggler import find_straggler, straggler_json, victims
from stepwise_agent.rank_summary import read_summaries

if TYPE_CHECKING:
    from profilers.trace.events import Trace

_TRACE_RANK = re.compile(r"^rank(\d+)\.")
SOURCE = (
    "agent summaries"  # ``job["source"]`` of a run's views (a folder's map and reduce has none)
)


def is_run_views(job: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """Whether ``job`` is a run's cross-rank views from its agent summaries (:func:`run_job_views`): N ranks, of
    which only ``traced_ranks`` kept a trace."""
    return job is not None and job.get("source") == SOURCE


def read_agent_summaries(run_dir: Path) -> dict[int, dict[str, Any]]:
    """The per-rank summaries the agent wrote in ``run_dir/summaries`` (its own reader), those whose steps are
    all well formed: a summary edited by hand or cut short by a full disk is left out, never a crash."""
    return {
        rank: data
        for rank, data in read_summaries(run_dir).items()
        if isinstance(data.get("steps"), list) and all(_step_ok(r) for r in data["steps"])
    }


def _step_ok(row: Any) -> bool:
    """A summary's step row: an integer step and finite, non-negative µs for its span, work and collectives."""
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("step"), int)
        or isinstance(row.get("step"), bool)
    ):
        return False
    values = [row.get(k) for k in ("step_us", "work_us", "comm_us")]
    return all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in values
    )


def traced_ranks(run_dir: Path) -> list[int]:
    tb = run_dir / "tb"
    found = {
        int(m.group(1))
        for p in (tb.iterdir() if tb.is_dir() else [])
        if p.name.endswith((".json", ".json.gz")) and (m := _TRACE_RANK.match(p.name))
    }
    return sorted(found)


def run_job_views(run_dir: Path, trace: Trace | None = None) -> dict[str, Any] | None:
    """The cross-rank views of a run's agent summaries, or None when it has none. ``trace``: the run's kept traces,
    already loaded by the caller (its analysis), so that the slowest rank's critical path reads no file again."""
    summaries = read_agent_summaries(run_dir)
    if not summaries:
        return None
    ranks = sorted(summaries)
    steps = sorted({int(r["step"]) for s in summaries.values() for r in s["steps"]})

    def matrix(field: str) -> list[list[float | None]]:
        rows = []
        for rank in ranks:
            by_step = {int(r["step"]): float(r[field]) / 1e3 for r in summaries[rank]["steps"]}
            rows.append([None if s not in by_step else round(by_step[s], 4) for s in steps])
        return rows

    def median(rank: int, field: str) -> float:
        values = [float(r[field]) / 1e3 for r in summaries[rank]["steps"]]
        return statistics.median(values) if values else 0.0

    per_rank = [
        {
            "rank": r,
            "steps": len(summaries[r]["steps"]),
            "step_ms": round(median(r, "step_us"), 4),
            "work_ms": round(median(r, "work_us"), 4),
            "comm_ms": round(median(r, "comm_us"), 4),
        }
        for r in ranks
    ]
    call = find_straggler(
        {
            r: [
                (float(x["step_us"]) / 1e3, float(x["work_us"]) / 1e3)
                for x in summaries[r]["steps"]
            ]
            for r in ranks
        }
    )
    s = call.straggler
    straggler = (
        None
        if s is None
        else {
            **straggler_json(s),
            "victims": victims(s, {int(r["rank"]): float(r["comm_ms"]) for r in per_rank}),
        }
    )
    traced = traced_ranks(run_dir)
    slowest = call.rank if call.rank is not None else ranks[0]
    return {
        "source": SOURCE,
        "ranks": ranks,
        "traced_ranks": traced,
        "steps": steps,
        "step_ms": matrix("step_us"),
        "comm_ms": matrix("comm_us"),
        "per_rank": per_rank,
        "straggler": straggler,
        "straggler_reason": call.to_json(),
        "critical_path": run_critical_path(run_dir, slowest, traced, trace),
    }


def run_critical_path(
    run_dir: Path, rank: int, traced: list[int], trace: Trace | None = None
) -> dict[str, Any]:
    """The critical path of ``rank``'s median step (:mod:`profilers.jobs.critical_path`) when the run kept that
    rank's trace, else why not: read from ``trace`` (the run's kept traces, loaded by the caller) when it holds
    that rank, else from the rank's one file."""
    from profilers.jobs.critical_path import critical_path, path_json, unavailable

    if rank not in traced:
        return unavailable(
            rank, None, f"needs rank {rank}'s trace: launch with --trace-ranks {rank} (or slowest)"
        )
    path = next(
        p
        for p in sorted((run_dir / "tb").iterdir())
        if (m := _TRACE_RANK.match(p.name))
        and int(m.group(1)) == rank
        and p.name.endswith((".json", ".json.gz"))
    )
    if trace is not None and rank in trace.ranks:
        cp = critical_path(trace, rank=rank)
    else:
        from profilers.errors import TraceError
        from profilers.trace.load import load_trace_files
        from profilers.trace.sources import find_trace_files

        try:
            cp = critical_path(load_trace_files(find_trace_files(path), str(path)))
        except TraceError as err:  # the views of all N stand without it, and say why it is missing
            return unavailable(rank, path.name, f"its trace could not be read: {err}")
    return path_json(None if cp is None else cp.to_json(), rank, path.name)
