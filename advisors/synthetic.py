"""Build small, exact :class:`~profilers.trace.breakdown.Breakdown` values (and observations) by hand.

The rules' ``fires``/``passes`` examples and the advisor's unit tests use these: every number is stated as a
share of step time, so an example reads like the situation it describes ("loader 30% exposed, GPU busy 60%").
Kernel names are real-looking so that the engine's own name classes apply (``sgemm_128x64_nn`` is an fp32 GEMM,
``ampere_bf16_s16816gemm`` a Tensor Core one).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from advisors.observation import Observation, RunFacts
from profilers.trace import breakdown_parts as parts
from profilers.trace.breakdown import CATEGORIES, Breakdown
from profilers.trace.memory_snapshot import GIB, AllocationSite, MemorySnapshot

KERNEL_NAMES = {
    "matmul": "sgemm_128x64_nn",  # no architecture in the name: the synthetic GPU is of no known kind
    "matmul_low": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
    "elementwise": "void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>",
    "normalization": "void at::native::layer_norm_kernel<float>",
    "communication": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "all_to_all": "ncclDevKernel_SendRecv",
    "all_gather": "ncclDevKernel_AllGather_RING_LL",
    "triton": "triton_poi_fused_add_mul_0",
    "other": "synthetic_kernel",
}
#: ``kernels`` keys that name a kind of kernel rather than a class: the class they count as.
KERNEL_ALIASES = {
    "all_to_all": "communication",
    "all_gather": "communication",
    "triton": "elementwise",
}


def breakdown_of(
    shares: Mapping[str, float],
    *,
    device: str = "gpu",
    step_ms: float = 100.0,
    n_steps: int = 4,
    ranks: Sequence[int] = (0,),
    busy: float | None = None,
    kernels: Mapping[str, float] | None = None,
    low_precision: float = 0.0,
    kernels_per_step: float = 200.0,
    median_kernel_us: float = 100.0,
    ops: Mapping[str, float] | None = None,
    comm_total: float | None = None,
    comm_overlapped: float = 0.0,
    syncs: Mapping[str, float] | None = None,
    pageable_copy: float = 0.0,
    pinned_copy: float = 0.0,
    memory_peak: float | None = None,
    cpu_matmul: Mapping[str, float] | None = None,
    rank_step_ms: Sequence[float] | None = None,
    rank_exposed_ms: Sequence[float] | None = None,
    steps_inferred: bool = False,
    optimizers: Sequence[str] = (),
) -> Breakdown:
    """A breakdown whose categories take ``shares`` of every step (``other`` takes the rest).

    ``kernels`` maps a kernel class (or a :data:`KERNEL_ALIASES` kind: ``all_to_all``, ``all_gather``,
    ``triton``) to its time as a share of step time; ``low_precision`` is the fraction of
    matmul kernel time in Tensor Core kernels. ``ops`` maps host op names to inclusive time shares;
    ``cpu_matmul`` maps ``fp32``/``low``/``unknown`` to matmul op time shares. ``rank_step_ms`` and
    ``rank_exposed_ms`` give each rank its own step time and exposed communication (for stragglers);
    ``optimizers`` the classes of the ``Optimizer.step#<Class>.step`` spans the trace would show.
    """
    unknown = sorted(set(shares) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"unknown categories {unknown}")
    step_ns = int(step_ms * 1e6)
    per_step = _per_step(shares, step_ns, n_steps, ranks, rank_step_ms, rank_exposed_ms)
    total = int(per_step["step_ns"].sum())
    if busy is None:
        busy = sum(
            shares.get(c, 0.0) for c in ("gpu_compute", "gpu_memcpy", "gpu_memset", "communication")
        )
    k_table = _kernel_table(kernels or {}, low_precision, total, kernels_per_step * len(per_step))
    class_ns = {
        c: 0 for c in ("matmul", "normalization", "elementwise", "communication", "memory", "other")
    }
    for kclass, total_ns in zip(k_table["kclass"].tolist(), k_table["total_ns"].tolist()):
        class_ns[kclass] += int(total_ns)
    class_ns["memory"] = int((pageable_copy + pinned_copy) * total)
    comm_ns = int(
        (comm_total if comm_total is not None else shares.get("communication", 0.0)) * total
    )
    cm = cpu_matmul or {}
    return Breakdown(
        device=device,
        device_name="Synthetic GPU" if device == "gpu" else "CPU",
        ranks=tuple(ranks),
        n_steps=n_steps,
        steps_inferred=steps_inferred,
        per_step=per_step,
        per_rank=parts.rank_table(per_step),
        kernels=k_table,
        ops=_op_table(ops or {}, total),
        kernel_class_ns=class_ns,
        gpu_busy_ns=int(busy * total) if device == "gpu" else 0,
        comm_total_ns=comm_ns,
        comm_overlapped_ns=int(comm_overlapped * total),
        syncs=parts.SyncCounts(
            **{
                "stream_sync": 0.0,
                "device_sync": 0.0,
                "event_sync": 0.0,
                "item": 0.0,
                "malloc_free": 0.0,
                **(syncs or {}),
            },
            pageable_copy_ns=int(pageable_copy * total),
            pinned_copy_ns=int(pinned_copy * total),
        ),
        memory=_memory(memory_peak),
        host=parts.HostStats(
            kernels_per_step=kernels_per_step if device == "gpu" else 0.0,
            median_kernel_us=median_kernel_us if device == "gpu" else 0.0,
            launch_ns_per_step=0.0,
        ),
        cpu_matmul=parts.CpuMatmul(
            total_ns=int(sum(cm.values()) * total),
            fp32_ns=int(cm.get("fp32", 0) * total),
            low_precision_ns=int(cm.get("low", 0) * total),
            unknown_ns=int(cm.get("unknown", 0) * total),
        ),
        warnings=(),
        optimizers=tuple(optimizers),
    )


def observation(
    shares: Mapping[str, float] | None = None,
    *,
    run: RunFacts | None = None,
    no_trace: bool = False,
    snapshot: MemorySnapshot | None = None,
    device_memory_gib: float | None = None,
    **kw: Any,
) -> Observation:
    """An observation of a synthetic breakdown (or of a run alone, with ``no_trace``; or of a memory
    ``snapshot`` alone, optionally with the device total the user stated)."""
    b = None if no_trace or snapshot is not None else breakdown_of(shares or {}, **kw)
    total = None if device_memory_gib is None else int(device_memory_gib * GIB)
    return Observation(
        source="synthetic", breakdown=b, run=run, snapshot=snapshot, device_memory_bytes=total
    )


def snapshot_of(peak_gib: float, reserved_gib: float, oom_events: int = 0) -> MemorySnapshot:
    """A memory snapshot summary whose peak live allocation and reservation are the given sizes."""
    return MemorySnapshot(
        source="synthetic.pickle",
        segments=8,
        reserved_bytes=int(reserved_gib * GIB),
        allocated_bytes=int(0.1 * peak_gib * GIB),
        peak_allocated_bytes=int(peak_gib * GIB),
        history_events=1000,
        oom_events=oom_events,
        expandable_segments=False,
        top_sites=(AllocationSite("model.py:39 forward", int(0.4 * peak_gib * GIB), 12),),
    )


def run_facts(status: str = "ok", **kw: Any) -> RunFacts:
    """A :class:`RunFacts` with plain defaults; ``kw`` overrides any field."""
    base: dict[str, Any] = dict(
        error=None,
        steps_done=20,
        planned_steps=20,
        step_time_ms=100.0,
        samples_per_s=320.0,
        peak_memory_mb=500.0,
        memory_budget_mb=None,
        final_loss=1.0,
        losses=(),
        world_size=1,
        device="cpu",
        spec=None,
    )
    return RunFacts(status=status, **{**base, **kw})


def _per_step(
    shares: Mapping[str, float],
    step_ns: int,
    n_steps: int,
    ranks: Sequence[int],
    rank_step_ms: Sequence[float] | None,
    rank_exposed_ms: Sequence[float] | None,
) -> pd.DataFrame:
    rows = []
    for i, rank in enumerate(ranks):
        ns = int(rank_step_ms[i] * 1e6) if rank_step_ms else step_ns
        for step in range(n_steps):
            row: dict[str, Any] = {
                "rank": rank,
                "step": step,
                "start_ns": step * ns,
                "end_ns": (step + 1) * ns,
                "step_ns": ns,
            }
            for c in CATEGORIES[:-1]:
                row[c] = int(shares.get(c, 0.0) * ns)
            if rank_exposed_ms:
                row["communication"] = int(rank_exposed_ms[i] * 1e6)
            row["other"] = ns - sum(row[c] for c in CATEGORIES[:-1])
            if row["other"] < 0:
                raise ValueError("shares add up to more than 1")
            rows.append(row)
    return pd.DataFrame(rows).astype(
        {c: np.int64 for c in ("start_ns", "end_ns", "step_ns", *CATEGORIES)}
    )


def _kernel_table(
    kernels: Mapping[str, float], low_precision: float, total: int, count: float
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for key, share in kernels.items():
        kclass = KERNEL_ALIASES.get(key, key)
        pieces = [(key, share, False)]
        if kclass == "matmul":
            pieces = [
                ("matmul", share * (1 - low_precision), False),
                ("matmul_low", share * low_precision, True),
            ]
        for key, s, low in pieces:
            if s > 0:
                rows.append(
                    {
                        "name": KERNEL_NAMES[key],
                        "kclass": kclass,
                        "total_ns": int(s * total),
                        "low_precision": low,
                    }
                )
    n = max(len(rows), 1)
    for r in rows:
        r["count"] = max(int(count / n), 1)
        r["mean_us"] = r["total_ns"] / r["count"] / 1e3
    cols = ["name", "kclass", "count", "total_ns", "mean_us", "low_precision"]
    return pd.DataFrame(rows, columns=cols)


def _op_table(ops: Mapping[str, float], total: int) -> pd.DataFrame:
    rows = [
        {"name": n, "count": 1, "total_ns": int(s * total), "mean_us": s * total / 1e3}
        for n, s in ops.items()
    ]
    return pd.DataFrame(rows, columns=["name", "count", "total_ns", "mean_us"])


def _memory(peak_share: float | None) -> parts.MemoryPeak:
    if peak_share is None:
        return parts.MemoryPeak(None, None, None, None)
    capacity = 16 * GIB
    return parts.MemoryPeak(int(peak_share * capacity), int(peak_share * capacity), capacity, None)
