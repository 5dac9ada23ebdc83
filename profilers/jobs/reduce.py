"""The reduce half of a many-rank analysis: per-rank summaries (:mod:`profilers.jobs.rank_summary`) → the job's
:class:`~profilers.trace.breakdown.Breakdown` and its cross-rank views, without any rank's events.

Every figure of the breakdown is a sum, maximum or count over ranks, so adding the summaries up gives what one
breakdown of every rank's events at once gives (``tests/profilers/jobs/test_job.py`` holds the ``analyze --json`` of both
equal on every shared multi-rank trace). Ranks are resolved here, in file order, as the whole-set reader does: a
file's own rank, else the rank its name suggests, else its position; a rank taken by an earlier file moves on.

The cross-rank views (:func:`job_views`): a rank × step table of step time and exposed communication, the
straggler (:mod:`profilers.jobs.straggler`) as culprit and victims, or why no rank is marked, each collective's
exposed time per rank, and the critical path of the rank of most work (:mod:`profilers.jobs.critical_path`, found
in that rank's trace by the map; :func:`culprit_extra` stays the view of the straggler's longer step that the
summaries alone give).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from profilers.jobs.critical_path import job_critical_path
from profilers.jobs.straggler import straggler_json, victims
from profilers.trace import breakdown_parts as parts
from profilers.trace.breakdown import CATEGORIES, Breakdown
from profilers.efficiency.flops import TraceFlops

_MAX_RANK = 2**31 - 1
TOP_COLLECTIVES = 10


@dataclass(frozen=True)
class JobAnalysis:
    """A job's breakdown from its ranks' summaries, the DataLoader facts' inputs, and the cross-rank views."""

    breakdown: Breakdown
    loader_total_ns: int
    loader_names: tuple[str, ...]
    views: dict[str, Any]
    summaries: int
    cached: int
    module_events: int = 0  # nn.Module events in the ranks' traces (with_stack / with_modules)


def resolve_ranks(summaries: Sequence[dict[str, Any]]) -> tuple[list[int], list[str]]:
    """Each summary's rank in the job (file order) and warnings for those moved off a taken rank."""
    used: set[int] = set()
    out, warnings = [], []
    for s in summaries:
        own, hint, order = int(s["rank"]), s.get("rank_hint"), int(s["order"])
        rank = next(
            (c for c in (own, hint) if c is not None and 0 <= c <= _MAX_RANK and c not in used),
            None,
        )
        if rank is None:
            rank = order
            while rank in used:
                rank += 1
            warnings.append(
                f"{s['file']}: its rank is negative, beyond int32 or taken by another file; read as "
                f"rank {rank}"
            )
        used.add(rank)
        out.append(rank)
    return out, warnings


def reduce_summaries(summaries: Sequence[dict[str, Any]]) -> JobAnalysis:
    """The job's analysis from its ranks' summaries (in file order)."""
    summaries = sorted(summaries, key=lambda s: int(s["order"]))
    ranks, rank_warnings = resolve_ranks(summaries)
    frames = []
    for s, rank in zip(summaries, ranks):
        df = pd.DataFrame(s["per_step"]).astype(np.int64)
        df.insert(0, "rank", np.int32(rank))
        frames.append(df)
    cols = ["rank", "step", "start_ns", "end_ns", "step_ns", *CATEGORIES]
    per_step = (
        pd.concat(frames, ignore_index=True)[cols]
        if frames
        else pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})
    )
    per_step = per_step.sort_values("rank", kind="stable", ignore_index=True)
    n_rows = max(len(per_step), 1)
    devices: dict[int, tuple[str, int | None]] = {}
    for s in summaries:
        for index, name, mem in s["devices"]:
            devices.setdefault(int(index), (str(name), mem))
    any_gpu = any(s["has_gpu"] for s in summaries)
    families = [s["accelerator"] for s in summaries if s.get("accelerator")]
    device_name = (
        devices[min(devices)][0]
        if devices
        else (families[0] if families else "GPU" if any_gpu else "CPU")
    )
    capacity = [m for _, m in devices.values() if m]
    # the first rank's CUDA that says one, as a one-file load of every rank would take it
    cuda = next((s["cuda_runtime"] for s in summaries if s.get("cuda_runtime")), None)
    warnings = list(dict.fromkeys(w for s in summaries for w in s["warnings"]))
    b = Breakdown(
        device="gpu" if any(s["device"] == "gpu" for s in summaries) else "cpu",
        device_name=device_name,
        ranks=tuple(sorted(ranks)),
        n_steps=int(per_step["step"].nunique()),
        steps_inferred=bool(summaries) and all(s["steps_inferred"] for s in summaries),
        per_step=per_step,
        per_rank=parts.rank_table(per_step),
        kernels=_kernels(summaries),
        ops=_ops(summaries),
        kernel_class_ns=_sum_dicts(s["kernel_class_ns"] for s in summaries),
        gpu_busy_ns=sum(int(s["gpu_busy_ns"]) for s in summaries),
        comm_total_ns=sum(int(s["comm_total_ns"]) for s in summaries),
        comm_overlapped_ns=sum(int(s["comm_overlapped_ns"]) for s in summaries),
        syncs=_syncs(summaries, n_rows),
        memory=parts.MemoryPeak(
            _max(s["memory"][0] for s in summaries),
            _max(s["memory"][1] for s in summaries),
            min(capacity) if capacity else None,
            _max(s["memory"][2] for s in summaries),
        ),
        host=_host(summaries, n_rows),
        cpu_matmul=parts.CpuMatmul(
            *[sum(int(s["cpu_matmul"][i]) for s in summaries) for i in range(4)]
        ),
        warnings=tuple(warnings + rank_warnings),
        compiled_spans=sum(int(s["compiled_spans"]) for s in summaries),
        optimizers=_optimizers(summaries),
        flops=_flops(summaries, ranks),
        cuda_runtime=cuda,
    )
    loader_names = tuple(dict.fromkeys(n for s in summaries for n in s["loader"][1]))
    return JobAnalysis(
        b,
        sum(int(s["loader"][0]) for s in summaries),
        loader_names,
        job_views(b, summaries, ranks),
        len(summaries),
        sum(bool(s.get("cached")) for s in summaries),
        sum(int(s.get("module_events") or 0) for s in summaries),
    )


def _max(values: Any) -> int | None:
    present = [int(v) for v in values if v is not None]
    return max(present) if present else None


def _sum_dicts(dicts: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def _kernels(summaries: Sequence[dict[str, Any]]) -> pd.DataFrame:
    rows = [r for s in summaries for r in s["kernels"]]
    if not rows:
        return pd.DataFrame(
            columns=["name", "kclass", "count", "total_ns", "mean_us", "low_precision"]
        )
    df = pd.DataFrame(rows, columns=["name", "kclass", "count", "total_ns", "low_precision"])
    g = df.groupby("name", sort=True).agg(
        kclass=("kclass", "first"),
        count=("count", "sum"),
        total_ns=("total_ns", "sum"),
        low_precision=("low_precision", "first"),
    )
    g = g.reset_index()
    g["mean_us"] = g["total_ns"] / g["count"] / 1e3
    return g.sort_values("total_ns", ascending=False, ignore_index=True)[
        ["name", "kclass", "count", "total_ns", "mean_us", "low_precision"]
    ]


def _ops(summaries: Sequence[dict[str, Any]]) -> pd.DataFrame:
    rows = [r for s in summaries for r in s["ops"]]
    if not rows:
        return pd.DataFrame(columns=["name", "count", "total_ns", "mean_us"])
    g = (
        pd.DataFrame(rows, columns=["name", "count", "total_ns"])
        .groupby("name", sort=True)
        .sum()
        .reset_index()
    )
    g["mean_us"] = g["total_ns"] / g["count"] / 1e3
    return g.sort_values("total_ns", ascending=False, ignore_index=True)


def _syncs(summaries: Sequence[dict[str, Any]], n_rows: int) -> parts.SyncCounts:
    total = (
        {k: sum(float(s["syncs"][k]) for s in summaries) for k in summaries[0]["syncs"]}
        if summaries
        else {}
    )
    get = total.get
    return parts.SyncCounts(
        stream_sync=get("stream_sync", 0.0) / n_rows,
        device_sync=get("device_sync", 0.0) / n_rows,
        event_sync=get("event_sync", 0.0) / n_rows,
        item=get("item", 0.0) / n_rows,
        malloc_free=get("malloc_free", 0.0) / n_rows,
        pageable_copy_ns=int(get("pageable_copy_ns", 0)),
        pinned_copy_ns=int(get("pinned_copy_ns", 0)),
    )


def _host(summaries: Sequence[dict[str, Any]], n_rows: int) -> parts.HostStats:
    values: dict[int, int] = {}
    for s in summaries:
        for v, c in zip(*s["kernel_durations"]):
            values[int(v)] = values.get(int(v), 0) + int(c)
    n = sum(values.values())
    return parts.HostStats(
        kernels_per_step=float(n) / n_rows,
        median_kernel_us=_median_of_counts(values) / 1e3 if n else 0.0,
        launch_ns_per_step=float(sum(int(s["launch_ns"]) for s in summaries)) / n_rows,
    )


def _median_of_counts(values: dict[int, int]) -> float:
    """The median of a multiset given as value → count (numpy's median: the mean of the middle two)."""
    keys = sorted(values)
    counts = np.cumsum([values[k] for k in keys])
    n = int(counts[-1])
    lo = keys[int(np.searchsorted(counts, (n - 1) // 2, side="right"))]
    hi = keys[int(np.searchsorted(counts, n // 2, side="right"))]
    return (lo + hi) / 2


def _optimizers(summaries: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for s in summaries:
        for name, c in s["optimizers"]:
            counts[name] = counts.get(name, 0) + int(c)
    return tuple(sorted(counts, key=lambda n: -counts[n]))


def _flops(summaries: Sequence[dict[str, Any]], ranks: Sequence[int]) -> TraceFlops | None:
    per_step: dict[tuple[int, int], float] = {}
    by_dtype: dict[str, float] = {}
    counts = [0, 0, 0]
    for s, rank in zip(summaries, ranks):
        f = s["flops"]
        if f is None:
            continue
        for step, v in f["per_step"]:
            per_step[(rank, int(step))] = per_step.get((rank, int(step)), 0.0) + float(v)
        for k, v in f["by_dtype"].items():
            by_dtype[k] = by_dtype.get(k, 0.0) + float(v)
        counts = [a + int(b) for a, b in zip(counts, f["counts"])]
    return TraceFlops(per_step, by_dtype, *counts)


def job_views(
    b: Breakdown, summaries: Sequence[dict[str, Any]], ranks: Sequence[int]
) -> dict[str, Any]:
    """The cross-rank views: step time and exposed communication per rank and step (ms), the straggler with its
    victims, and the collectives' exposed time per rank."""
    ps = b.per_step
    steps = sorted(int(x) for x in ps["step"].unique())
    order = sorted(int(r) for r in ps["rank"].unique())
    row_of = {r: i for i, r in enumerate(order)}
    col_of = {s: j for j, s in enumerate(steps)}
    grids = {c: np.full((len(order), len(steps)), np.nan) for c in ("step_ns", "communication")}
    rows = [row_of[int(r)] for r in ps["rank"]]
    cols = [col_of[int(s)] for s in ps["step"]]
    for c, grid in grids.items():
        grid[rows, cols] = ps[c].to_numpy(np.float64) / 1e6

    def matrix(col: str) -> list[list[float | None]]:
        return [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in grids[col]]

    files = {int(r): str(s["file"]) for s, r in zip(summaries, ranks)}
    call = b.straggler_call
    straggler = straggler_view(b)
    if straggler is not None:
        straggler["extra_work"] = culprit_extra(summaries, ranks, int(straggler["culprit"]))
    return {
        "ranks": order,
        "files": [files.get(r) for r in order],
        "steps": steps,
        "step_ms": matrix("step_ns"),
        "exposed_comm_ms": matrix("communication"),
        "straggler": straggler,
        "straggler_reason": call.to_json(),
        "collectives": collective_view(summaries, ranks),
        "collective_sizes": collective_size_view(summaries),
        "critical_path": None
        if call.rank is None
        else job_critical_path(summaries, ranks, call.rank),
    }


def straggler_view(b: Breakdown) -> dict[str, Any] | None:
    """The straggler (:mod:`profilers.jobs.straggler`), ``None`` when no rank is marked, and its victims: the
    ranks whose median exposed communication exceeds its own by at least half its extra work."""
    s = b.straggler
    if s is None:
        return None
    wait = dict(
        zip(
            b.per_rank["rank"].astype(int).tolist(),
            b.per_rank["exposed_comm_ms"].astype(float).tolist(),
        )
    )
    return {**straggler_json(s), "victims": victims(s, wait)}


def collective_view(
    summaries: Sequence[dict[str, Any]], ranks: Sequence[int]
) -> list[dict[str, Any]]:
    """Per collective name (largest exposed first): count, total and exposed ms over the job, and the exposed ms of
    each rank (rank → ms)."""
    by_name: dict[str, dict[str, Any]] = {}
    for s, rank in zip(summaries, ranks):
        for name, count, total, exposed in s["collectives"]:
            row = by_name.setdefault(
                name, {"name": name, "count": 0, "total_ns": 0, "exposed_ns": 0, "ranks": {}}
            )
            row["count"] += int(count)
            row["total_ns"] += int(total)
            row["exposed_ns"] += int(exposed)
            row["ranks"][str(rank)] = round(int(exposed) / 1e6, 4)
    rows = sorted(by_name.values(), key=lambda r: -r["exposed_ns"])[:TOP_COLLECTIVES]
    return [
        {
            "name": r["name"],
            "count": r["count"],
            "total_ms": round(r["total_ns"] / 1e6, 4),
            "exposed_ms": round(r["exposed_ns"] / 1e6, 4),
            "exposed_ms_by_rank": r["ranks"],
        }
        for r in rows
    ]


def collective_size_view(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per collective kind (most bytes first): calls and how many were sized, the bytes moved (each call's first
    input, summed over ranks), the mean message, the kind's time (its kernels on a GPU rank, its ops on a CPU
    one) and the algorithmic bandwidth, bytes over time, where every call was sized. Kinds of a trace recorded
    without shapes have calls but no bytes, and say so (``sized_calls`` 0)."""
    from profilers.jobs.collectives import collective_kind

    by_kind: dict[str, list[int]] = {}
    time_ns: dict[str, int] = {}
    for s in summaries:
        for kind, calls, sized, nbytes in s.get("collective_sizes") or []:
            row = by_kind.setdefault(kind, [0, 0, 0])
            row[0], row[1], row[2] = row[0] + int(calls), row[1] + int(sized), row[2] + int(nbytes)
        for name, _count, total, _exposed in s.get("collectives") or []:
            if (kind := collective_kind(str(name))) is not None:
                time_ns[kind] = time_ns.get(kind, 0) + int(total)
    if (
        "sendrecv" in time_ns
        and "sendrecv" not in by_kind
        and "alltoall" in by_kind
        and "alltoall" not in time_ns
    ):
        # NCCL runs all_to_all as grouped sends and receives: its kernels are ncclKernel_SendRecv_…
        time_ns["alltoall"] = time_ns.pop("sendrecv")
    out = []
    for kind, (calls, sized, nbytes) in sorted(by_kind.items(), key=lambda kv: -kv[1][2]):
        t = time_ns.get(kind, 0)
        out.append(
            {
                "kind": kind,
                "calls": calls,
                "sized_calls": sized,
                "bytes": nbytes,
                "mean_message_mb": round(nbytes / sized / 1e6, 4) if sized else None,
                "time_ms": round(t / 1e6, 4) if t else None,
                "algbw_gb_s": round(nbytes / t, 3) if t and sized and sized == calls else None,
            }
        )
    return out


WORK_CATEGORIES = (
    "gpu_compute",
    "gpu_memcpy",
    "gpu_memset",
    "dataloader",
    "host_runtime",
    "optimizer",
    "backward",
    "forward",
    "other",
)  # what a rank does itself: not communication, which is others' waiting
TOP_EXTRA = 5


def culprit_extra(
    summaries: Sequence[dict[str, Any]], ranks: Sequence[int], culprit: int
) -> dict[str, Any]:
    """Where the straggler's extra time goes, per step: each work category, kernel and host operator on the
    culprit against the median of the other ranks (ms per step), largest excess first. It reads the summaries
    alone (no rank's events), so it is the same on every engine. Not a dependency graph's critical path: the
    rank's longer path broken down by what it is made of."""

    def per_step(s: dict[str, Any]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        n = max(len(s["per_step"].get("step", [])), 1)
        cats = {c: sum(s["per_step"].get(c, [])) / n / 1e6 for c in WORK_CATEGORIES}
        kernels: dict[str, float] = {}
        for name, kclass, _count, total, _low in s.get("kernels") or []:
            if kclass != "communication":
                kernels[str(name)] = kernels.get(str(name), 0.0) + int(total) / n / 1e6
        ops = {str(name): int(total) / n / 1e6 for name, _count, total in s.get("ops") or []}
        return cats, kernels, ops

    mine = [per_step(s) for s, r in zip(summaries, ranks) if int(r) == culprit]
    others = [per_step(s) for s, r in zip(summaries, ranks) if int(r) != culprit]
    if not mine or not others:
        return {"categories": [], "kernels": [], "ops": []}

    def excess(i: int, key: str, top: int | None) -> list[dict[str, Any]]:
        names = set(mine[0][i]) | {k for o in others for k in o[i]}
        rows: list[dict[str, Any]] = []
        for name in names:
            own = mine[0][i].get(name, 0.0)
            median = float(np.median([o[i].get(name, 0.0) for o in others]))
            if own - median > 1e-6:
                rows.append(
                    {
                        key: name,
                        "culprit_ms": round(own, 4),
                        "others_median_ms": round(median, 4),
                        "extra_ms": round(own - median, 4),
                    }
                )
        rows.sort(
            key=lambda r: (-float(r["extra_ms"]), str(r[key]))
        )  # ties by name: the same order every run
        return rows[:top] if top else rows

    return {
        "categories": excess(0, "category", None),
        "kernels": excess(1, "name", TOP_EXTRA),
        "ops": excess(2, "name", TOP_EXTRA),
    }
