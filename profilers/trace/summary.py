"""A JSON-ready summary of a :class:`~profilers.trace.breakdown.Breakdown` (the facts half of ``analyze --json``)."""

from __future__ import annotations

from typing import Any

from profilers.trace.breakdown import CATEGORIES, Breakdown

TOP_N = 10


def _ms(ns: float) -> float:
    return round(float(ns) / 1e6, 4)


def breakdown_summary(b: Breakdown, top_n: int = TOP_N) -> dict[str, Any]:
    """Plain types only (str/int/float/bool/list/dict), stable field names: part of the CLI contract."""
    shares = b.shares()
    per_cat = b.category_ns()
    n_rows = max(len(b.per_step), 1)
    call = b.straggler_call
    straggler = call.straggler
    mem = b.memory
    return {
        "device": b.device,
        "device_name": b.device_name,
        "device_arch": None
        if (arch := b.gpu_arch) is None
        else {"name": arch.name, "sm": arch.sm, "basis": arch.basis},
        "ranks": list(b.ranks),
        "steps": b.n_steps,
        "steps_inferred": b.steps_inferred,
        "step_time_ms": round(b.step_time_ms, 4),
        "breakdown": {
            c: {"ms": _ms(per_cat[c] / n_rows), "share": round(shares[c], 6)} for c in CATEGORIES
        },
        "gpu_busy_share": round(b.gpu_busy_share, 6),
        "communication": {
            "total_ms": _ms(b.comm_total_ns / n_rows),
            "exposed_ms": _ms(per_cat["communication"] / n_rows),
            "overlapped_ms": _ms(b.comm_overlapped_ns / n_rows),
        },
        "kernel_classes": {k: round(b.kernel_class_share(k), 6) for k in b.kernel_class_ns},
        "top_kernels": [
            {
                "name": r["name"],
                "class": r["kclass"],
                "count": int(r["count"]),
                "total_ms": _ms(r["total_ns"]),
                "mean_us": round(float(r["mean_us"]), 3),
                "low_precision": bool(r["low_precision"]),
            }
            for r in b.kernels.head(top_n).to_dict("records")
        ],
        "top_ops": [
            {
                "name": r["name"],
                "count": int(r["count"]),
                "total_ms": _ms(r["total_ns"]),
                "mean_us": round(float(r["mean_us"]), 3),
            }
            for r in b.ops.head(top_n).to_dict("records")
        ],
        "syncs_per_step": {
            "stream_sync": b.syncs.stream_sync,
            "device_sync": b.syncs.device_sync,
            "event_sync": b.syncs.event_sync,
            "item": b.syncs.item,
            "malloc_free": b.syncs.malloc_free,
        },
        "memory": {
            "device_peak_allocated_mb": _mb(mem.device_allocated_bytes),
            "device_peak_reserved_mb": _mb(mem.device_reserved_bytes),
            "device_capacity_mb": _mb(mem.device_capacity_bytes),
            "device_peak_share": None
            if mem.device_peak_share is None
            else round(mem.device_peak_share, 4),
            "host_peak_allocated_mb": _mb(mem.host_allocated_bytes),
        },
        "per_rank": [
            {
                "rank": int(r["rank"]),
                "step_ms": round(float(r["step_ms"]), 4),
                "work_ms": round(float(r["work_ms"]), 4),
                "exposed_comm_ms": round(float(r["exposed_comm_ms"]), 4),
            }
            for r in b.per_rank.to_dict("records")
        ],
        "straggler": None
        if straggler is None
        else {
            "rank": straggler.rank,
            "work_ms": round(straggler.work_ms, 4),
            "median_work_ms": round(straggler.median_work_ms, 4),
            "excess_share": round(straggler.excess_share, 4),
        },
        "straggler_reason": call.to_json(),
        "warnings": list(b.warnings),
    }


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / 1024**2, 2)
