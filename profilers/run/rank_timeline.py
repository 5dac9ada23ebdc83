"""A watched run's ranks over the whole run: each rank's step wall and its own work per step (the wall minus its
time inside backward, :func:`profilers.run.rank_watch.work_ms`), with the run's captures — what the Job page draws
(:func:`reports.charts.ranks.ranks_over_time`) — and the ranks reduced as a job's rank summaries are
(:func:`reduce_ranks`: each rank's steps, median step, median work and samples/s, and the one straggler rule,
:func:`profilers.jobs.straggler.find_straggler`, over the whole run): what ``watch --json`` (``ranks``) and the Job
page say.

Every step counts: the whole rows (``steps.jsonl`` and the rows still open,
:func:`profilers.run.step_records.step_rows`) and the roll-ups of the steps a long run did not keep whole (a point
per roll-up at its median, :func:`profilers.run.step_records.rollups`). Profiled steps are left out of the
reduction (the profiler's cost is not the rank's)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profilers.jobs.straggler import StragglerCall, find_straggler
from profilers.run.captures import capture_records
from profilers.run.rank_watch import work_ms
from profilers.run.step_records import rollups, step_rows
from stepwise_agent.steady import samples_per_s  # the one samples/s

COLUMNS = ["rank", "step", "wall_ms", "work_ms", "profiled"]
MAX_POINTS = 2000  # per rank: a longer run is drawn as the median of each bucket of steps


def rank_steps(run_dir: Path) -> pd.DataFrame:
    """One row per rank and step (``rank``, ``step``, ``wall_ms``, ``work_ms``: None where the agent measured no
    backward, ``profiled``), in step order; a long run's steps are bucketed to :data:`MAX_POINTS` per rank (each
    bucket's median, at its first step; profiled when any of its steps was)."""
    rows = [
        {
            "rank": int(r.get("rank") or 0),
            "step": int(r["step"]),
            "wall_ms": r.get("wall_ms"),
            "work_ms": work_ms(r),
            "profiled": bool(r.get("profiled")),
        }
        for r in step_rows(run_dir)
        if isinstance(r.get("step"), int)
    ]
    rows += [
        {
            "rank": int(r.get("rank") or 0),
            "step": int(r["first_step"]),
            "wall_ms": r.get("wall_ms_median"),
            "work_ms": r.get("work_ms_median"),
            "profiled": False,
        }
        for r in rollups(run_dir)
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS).sort_values(["rank", "step"], kind="stable")
    frame[["wall_ms", "work_ms"]] = frame[["wall_ms", "work_ms"]].astype(float)
    steps = int(frame["step"].max()) + 1 if len(frame) else 0
    if steps <= MAX_POINTS:
        return frame.reset_index(drop=True)
    size = -(-steps // MAX_POINTS)
    frame["bucket"] = frame["step"] // size
    out = frame.groupby(["rank", "bucket"], as_index=False).agg(
        step=("step", "min"),
        wall_ms=("wall_ms", "median"),
        work_ms=("work_ms", "median"),
        profiled=("profiled", "any"),
    )
    return out[COLUMNS]


def rank_timeline(run_dir: Path) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The ranks' steps (:func:`rank_steps`) and the run's captures (:func:`capture_records`)."""
    return rank_steps(run_dir), capture_records(run_dir)


@dataclass(frozen=True)
class RankRecord:
    """One rank of a watched run over the whole run (its unprofiled steps)."""

    rank: int
    steps: int  # steps recorded (whole rows and rolled-up steps)
    median_step_ms: float | None
    median_work_ms: float | None  # None: the agent measured no backward on this rank
    samples_per_s: (
        float | None
    )  # stepwise_agent.steady.samples_per_s over the steps that counted samples


@dataclass(frozen=True)
class RanksReduced:
    """A watched job's ranks reduced (see the module docs)."""

    ranks: tuple[RankRecord, ...]
    straggler: StragglerCall | None  # None: some rank's work was not measured (see ``reason``)

    @property
    def straggler_rank(self) -> int | None:
        marked = self.straggler.straggler if self.straggler is not None else None
        return marked.rank if marked is not None else None

    @property
    def reason(self) -> str:
        if self.straggler is not None:
            return self.straggler.reason
        unmeasured = ", ".join(str(r.rank) for r in self.ranks if r.median_work_ms is None)
        return (
            f"No rank is judged: rank(s) {unmeasured} recorded no time inside backward, so their own work "
            "cannot be told from their waiting for the others."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ranks": [r.__dict__ for r in self.ranks],
            "straggler": self.straggler_rank,
            "straggler_reason": self.reason,
        }


def reduce_ranks(run_dir: Path) -> RanksReduced | None:
    """The ranks of a watched job of two or more ranks, reduced (see the module docs); None for one rank."""
    per: dict[int, dict[str, Any]] = {}
    for r in step_rows(run_dir):
        if (
            not isinstance(r.get("step"), int)
            or r.get("profiled")
            or not isinstance(r.get("wall_ms"), (int, float))
        ):
            continue
        p = per.setdefault(
            int(r.get("rank") or 0), {"points": [], "steps": 0, "walls": [], "samples": []}
        )
        p["points"].append((float(r["wall_ms"]), work_ms(r), 1))
        p["steps"] += 1
        if isinstance(r.get("samples"), (int, float)) and r["samples"]:
            p["walls"].append(float(r["wall_ms"]))
            p["samples"].append(float(r["samples"]))
    for r in rollups(run_dir):
        wall, n = r.get("wall_ms_median"), int(r.get("steps") or 0)
        if not isinstance(wall, (int, float)) or n <= 0:
            continue
        p = per.setdefault(
            int(r.get("rank") or 0), {"points": [], "steps": 0, "walls": [], "samples": []}
        )
        work = r.get("work_ms_median")
        p["points"].append(
            (float(wall), float(work) if isinstance(work, (int, float)) else None, n)
        )
        p["steps"] += n
        if (
            isinstance(r.get("samples"), (int, float))
            and r["samples"]
            and isinstance(r.get("wall_ms_sum"), (int, float))
        ):
            p["walls"].append(float(r["wall_ms_sum"]))
            p["samples"].append(float(r["samples"]))
    if len(per) < 2:
        return None
    records, judged = [], {}
    for rank in sorted(per):
        p = per[rank]
        # a roll-up stands for its steps: its median counted once per step it summarises
        walls = [w for w, _, n in p["points"] for _ in range(n)]
        works = [x for _, x, n in p["points"] if x is not None for _ in range(n)]
        records.append(
            RankRecord(
                rank=rank,
                steps=p["steps"],
                median_step_ms=round(statistics.median(walls), 4) if walls else None,
                median_work_ms=round(statistics.median(works), 4)
                if works and len(works) == len(walls)
                else None,
                samples_per_s=round(rate, 4)
                if (rate := samples_per_s(p["samples"], p["walls"])) is not None
                else None,
            )
        )
        if works and len(works) == len(walls):
            judged[rank] = [(w, x) for w, x, n in p["points"] if x is not None for _ in range(n)]
    return RanksReduced(tuple(records), find_straggler(judged) if len(judged) == len(per) else None)
