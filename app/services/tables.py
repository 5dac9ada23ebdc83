"""Frames for ``st.dataframe``: the run list and the kernel/op tables, in display units (ms, MiB)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from advisors.experiments.results.record import TrialRecord
from profilers.trace.memory_snapshot import GIB, MemorySnapshot
from profilers.run.records import RunRecord
from profilers.run.script_output import error_line
from stepwise_agent import steady

MAX_TABLE_ROWS = 500


def runs_frame(
    records: list[RunRecord],
    outcomes: Mapping[str, str] | None = None,
    analyses: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """One row per run, newest first (what the Runs page lists). ``outcomes``: an experiment's outcome word
    ("kept 1.42×", "rejected", "not applied") by run id, shown as its status, and its row names the run it was
    started from ("apply … ← resnet.json"), so an experiment is never a bare "ok" nobody can place.
    ``analyses``: the stored analysis' figures by run id (``advisors.analysis.stored.headline``): its step time,
    samples/s and bottleneck are the very ones its Analysis page and reports show; a run not analysed yet shows
    its record's figures and no bottleneck."""
    labels = {r.run_id: r.label for r in records}
    said = outcomes or {}
    stored = analyses or {}
    rows = []
    for r in records:
        head = stored.get(r.run_id)
        rows.append(
            {
                "run": r.label + (f" ← {labels[r.source_run]}" if r.source_run in labels else ""),
                "kind": r.kind,
                "status": said.get(r.run_id, r.status.value),
                "created": pd.Timestamp(r.created_unix, unit="s")
                .tz_localize("UTC")
                .tz_convert(None)
                .floor("s"),
                "ms/step": head["step_time_ms"] if head else r.step_time_ms,
                "samples/s": head["samples_per_s"] if head else r.samples_per_s,
                "peak MiB": r.peak_memory_mb,
                "bottleneck": (head or {}).get("bottleneck") or "",
                "device": r.device or "",
                "ranks": r.world_size,
                "error": error_line(r.error),
                "id": r.run_id,
            }
        )
    return pd.DataFrame(rows)


TRIAL_FRAME_COLUMNS = [
    "round",
    "fix",
    "part",
    "pair",
    "run",
    "status",
    "in verdict",
    "created",
    "ms/step",
    "samples/s",
    "peak MiB",
    "others' cores",
    "error",
    "id",
]


def trials_frame(trials: list[RunRecord], recorded: Sequence[TrialRecord] = ()) -> pd.DataFrame:
    """An experiment's trial runs in the order they ran: their round and fix, their part (baseline, patched,
    reference, or trial while it runs), pair, status and numbers — once the experiment has ended, the numbers of
    its record (:class:`~advisors.experiments.results.record.TrialRecord`: the very samples/s the verdict's median is taken
    over), so a verdict can be traced to the runs behind it."""
    by_id = {t.run_id: t for t in recorded if t.run_id}
    rows = []
    for r in sorted(trials, key=lambda r: r.created_unix):
        t = by_id.get(r.run_id)
        rows.append(
            {
                "round": t.round if t else None,
                "fix": t.fix_id if t else None,
                "part": t.role if t else (r.role or "trial"),
                "pair": t.pair if t else None,
                "run": r.label,
                "status": t.status if t else r.status.value,
                # a pair other programs competed for, left out of the verdict's medians (its reason says so)
                "in verdict": t.in_verdict
                if t and t.role != "diagnosis" and t.status == "ok"
                else None,
                "created": pd.Timestamp(r.created_unix, unit="s")
                .tz_localize("UTC")
                .tz_convert(None)
                .floor("s"),
                "ms/step": t.step_time_ms if t else r.step_time_ms,
                "samples/s": t.samples_per_s if t else r.samples_per_s,
                "peak MiB": t.peak_memory_mb if t else r.peak_memory_mb,
                "others' cores": t.others_cores if t else None,
                "error": error_line(t.error if t else r.error),
                "id": r.run_id,
            }
        )
    return pd.DataFrame(rows, columns=TRIAL_FRAME_COLUMNS)


def kernels_frame(kernels: pd.DataFrame, steps: int, limit: int = MAX_TABLE_ROWS) -> pd.DataFrame:
    """Kernels in steps: total and per-step ms, calls, mean µs, class, low precision."""
    if kernels.empty:
        return pd.DataFrame(
            columns=["kernel", "class", "total ms", "ms/step", "calls", "mean µs", "low precision"]
        )
    k = kernels.head(limit)
    return pd.DataFrame(
        {
            "kernel": k["name"],
            "class": k["kclass"],
            "total ms": k["total_ns"] / 1e6,
            "ms/step": k["total_ns"] / 1e6 / max(steps, 1),
            "calls": k["count"],
            "mean µs": k["mean_us"],
            "low precision": k["low_precision"],
        }
    )


def ops_frame(ops: pd.DataFrame, steps: int, limit: int = MAX_TABLE_ROWS) -> pd.DataFrame:
    """Host operators in steps (inclusive time): total and per-step ms, calls, mean µs."""
    if ops.empty:
        return pd.DataFrame(columns=["operator", "total ms", "ms/step", "calls", "mean µs"])
    o = ops.head(limit)
    return pd.DataFrame(
        {
            "operator": o["name"],
            "total ms": o["total_ns"] / 1e6,
            "ms/step": o["total_ns"] / 1e6 / max(steps, 1),
            "calls": o["count"],
            "mean µs": o["mean_us"],
        }
    )


def per_step_label(values: tuple[float, ...] | list[float]) -> str:
    """``"12.3 ms"``: the time per step of per-step times (elapsed ÷ steps), or a dash when there
    are none."""
    per = steady.time_per_step(values)
    return f"{per:.1f} ms" if per else "—"


def typical_label(values: tuple[float, ...] | list[float]) -> str:
    """``typical step (median) 2.1 ms, 12% of steps stalled`` when apart from the time per step,
    else ``""``."""
    return steady.typical_note(
        steady.time_per_step(values), steady.typical_step(values), steady.stalled_share(values)
    )


def snapshot_sites_frame(snapshot: MemorySnapshot) -> pd.DataFrame:
    """Where the largest allocations alive at a snapshot's peak were made (first frame outside torch)."""
    return pd.DataFrame(
        [
            {"allocated at": t.where, "GiB": round(t.bytes / GIB, 2), "allocations": t.count}
            for t in snapshot.top_sites
        ],
        columns=["allocated at", "GiB", "allocations"],
    )


def environment_table(env: Mapping[str, Any]) -> pd.DataFrame:
    """``compare --json``'s ``environment`` as rows: each field with A's and B's value ("not recorded"
    where a side does not say) and whether it differs."""
    from advisors.compare.environment import FIELDS, WORDS

    differs = set(env["differs"])
    rows = []
    for f in FIELDS:
        a, b = env["base"].get(f), env["new"].get(f)
        rows.append(
            {
                "": WORDS[f].capitalize() if f != "cuda" else WORDS[f],
                "A": "not recorded" if a is None else str(a),
                "B": "not recorded" if b is None else str(b),
                "differs": "yes" if f in differs else "",
            }
        )
    return pd.DataFrame(rows)
