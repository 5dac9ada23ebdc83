"""Each rank's per-step summary, written by the agent itself at capture time (standard library and torch only).

Under ``torchrun`` every rank profiles its window, but a full Kineto trace per rank is hundreds of MB on a real
job. So every rank writes ``summaries/rank{R}.json``: per profiled step its span, the time its collectives ran
(the union of collective operators and kernels inside the step) and the work outside them, and its collectives by
name; a few kB. Only the ranks asked for keep their full trace (``boot.json`` ``trace_ranks``: a list of ranks,
``"slowest"``, or absent for every rank, as before):

- a list: those ranks export their trace; the others drop it.
- ``"slowest"``: every rank writes its summary first; each then waits (at most ``SLOWEST_WAIT_S``) for the
  other ranks' summaries in the run folder and keeps its trace only if it is the rank with the most work per
  step (median step minus collective time): the straggler, picked from the summaries. Ranks that cannot see the
  others' summaries (no shared folder across nodes) keep theirs.

The analyst (``profilers.jobs.agent_summaries``) reads the summaries of all ranks and the traces of the few.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any, Iterable

SUMMARY_VERSION = 1
SLOWEST_WAIT_S = 60.0
# The analyst's own patterns (profilers.trace.kernel_classes COMM_OP / COMM_KERNEL), copied: the agent imports
# nothing of Stepwise's analysis. tests/stepwise_agent/test_rank_summary.py holds them equal.
COMM = re.compile(
    r"gloo|nccl|rccl|c10d::|record_param_comms|all_reduce|allreduce|all_gather|allgather|"
    r"reduce_scatter|reducescatter|sendrecv|barrier|alltoall|send|recv",
    re.IGNORECASE,
)
_STEP = re.compile(r"ProfilerStep(?:#(\d+)|\*)$")  # prof.events() names every step "ProfilerStep*"


def parse_trace_ranks(value: Any) -> list[int] | str | None:
    """``boot.json``'s ``trace_ranks``: None (every rank), ``"slowest"``, or a list of ranks."""
    if value is None or value == "all":
        return None
    if value == "slowest":
        return "slowest"
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    return sorted({int(v) for v in value})


def _union(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _covered(union: list[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in union)


def summarise_events(
    events: Iterable[Any], rank: int, world_size: int, first_step: int = 0
) -> dict[str, Any]:
    """The summary from the profiler's events (``prof.events()``: name and ``time_range`` in µs). Steps named
    ``ProfilerStep*`` are numbered in time order from ``first_step`` (the first profiled step)."""
    steps: list[tuple[int, float, float]] = []
    comm: list[tuple[float, float]] = []
    by_name: dict[str, list[float]] = {}
    for e in events:
        name = str(e.name)
        tr = getattr(e, "time_range", None)
        if tr is None:
            continue
        start, end = float(tr.start), float(tr.end)
        m = _STEP.match(name)
        if m:
            steps.append((-1 if m.group(1) is None else int(m.group(1)), start, end))
        elif COMM.search(name):
            comm.append((start, end))
            row = by_name.setdefault(name, [0, 0.0])
            row[0] += 1
            row[1] += end - start
    steps.sort(key=lambda s: s[1])
    steps = [(first_step + i if n < 0 else n, lo, hi) for i, (n, lo, hi) in enumerate(steps)]
    union = _union(comm)
    rows = []
    for step, lo, hi in steps:
        c = _covered(union, lo, hi)
        rows.append(
            {"step": step, "start_us": lo, "step_us": hi - lo, "comm_us": c, "work_us": hi - lo - c}
        )
    return {
        "version": SUMMARY_VERSION,
        "rank": rank,
        "world_size": world_size,
        "steps": rows,
        "collectives": [
            {"name": n, "count": int(v[0]), "total_us": v[1]}
            for n, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])
        ][:50],
        "written_unix": time.time(),
    }


def median_work_us(summary: dict[str, Any]) -> float:
    work = [float(r["work_us"]) for r in summary.get("steps", [])]
    return statistics.median(work) if work else 0.0


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    folder = run_dir / "summaries"
    folder.mkdir(exist_ok=True)
    path = folder / f"rank{summary['rank']}.json"
    tmp = folder / f".rank{summary['rank']}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(summary), encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_summaries(run_dir: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for p in sorted((run_dir / "summaries").glob("rank*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("rank"), int):
            out[data["rank"]] = data
    return out


def keeps_trace(
    run_dir: Path,
    rank: int,
    world_size: int,
    wanted: list[int] | str | None,
    wait_s: float = SLOWEST_WAIT_S,
) -> bool:
    """Whether this rank keeps its full trace (see the module docs); its own summary is already written."""
    if wanted is None:
        return True
    if wanted != "slowest":
        return rank in wanted
    deadline = time.monotonic() + wait_s
    while True:
        got = read_summaries(run_dir)
        if len(got) >= world_size or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if len(got) < 2:
        return True  # the others are out of sight: keep it rather than lose the straggler's trace
    slowest = max(sorted(got), key=lambda r: median_work_us(got[r]))
    return rank == slowest
