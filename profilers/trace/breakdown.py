"""``breakdown(trace) -> Breakdown``: attribute every nanosecond of every step, on every rank, exactly once.

Step time is the CPU ``ProfilerStep#N`` span. Inside it, categories claim time in a fixed priority order,
each claiming only time not yet claimed (the idea of the TensorBoard profiler plugin), so per step the
categories add up to the step time exactly and "the binding bottleneck" is well defined.

Ranks with GPU activity (``GPU_PRIORITY``)::

    gpu_compute > gpu_memcpy > gpu_memset > communication > dataloader > host_runtime
                > optimizer > backward > forward > other

``communication`` there is collective kernels (NCCL/RCCL) *not* hidden under compute, copies or sets: the
exposed part. The hidden part is reported as ``comm_overlapped_ns``. Host categories (dataloader, runtime,
optimizer/backward/forward CPU ops) only get time when the device is idle: time the GPU waits for the host.

CPU-only ranks (``CPU_PRIORITY``)::

    dataloader > optimizer > backward > forward (operators) > communication
               > data / optimizer / backward / forward phase annotations > other

On a CPU the operators *are* the compute, so they claim first; a gloo/c10d collective in flight (often on
its own thread) claims the time no operator covers: the main thread waiting for the all-reduce is exposed
communication. Time inside a ``## backward ##``-style annotation that neither covers goes to that phase.
``other`` is whatever no event covers (Python overhead, idle).

Closure optimizers (LBFGS, Lightning's automatic optimization) run forward and backward inside
``optimizer.step(closure)``; the agent marks the closure (``stepwise::optimizer_closure``), and its span is taken
out of the optimizer set, so operators inside it count as forward and backward and the optimizer keeps its update.

Collective ops are never work, on any rank: the four host work sets (dataloader, optimizer, backward,
forward) leave out the time their own thread spends inside a communication op (``c10d::allreduce_``,
``c10d::barrier``, ``gloo:all_reduce``, ``nccl:all_reduce``, ``record_param_comms``, torchrec awaitable waits;
:data:`profilers.trace.kernel_classes.COMM_OP`), including ops nested inside it and the enclosing ``Optimizer.step``
or autograd op around it. So on a CPU a barrier on the main thread is communication, hidden only where work
on *another* thread overlaps it, and ``comm_overlapped_ns`` measures collectives against that work, never
against themselves. On a GPU rank communication stays the collective kernels (the device categories add up
to device busy time); host time inside a collective op while the device idles is left to ``other``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profilers.efficiency.arch import GpuArch, infer_arch
from profilers.efficiency.peaks import device_peak
from profilers.efficiency.accelerator import is_non_gpu, shown_name
from profilers.trace import breakdown_parts as parts
from profilers.trace import python_idle as py_idle
from profilers.efficiency.flops import TraceFlops, trace_flops
from profilers.jobs.straggler import Straggler, StragglerCall, find_in_steps
from profilers.trace.intervals import Intervals
from profilers.trace.events import Trace

CATEGORIES = (
    "gpu_compute",
    "gpu_memcpy",
    "gpu_memset",
    "communication",
    "dataloader",
    "host_runtime",
    "optimizer",
    "backward",
    "forward",
    "other",
)  # column order of Breakdown.per_step
#: (category it counts as, event set) in claiming order; ``other`` takes the rest.
GPU_PRIORITY = (
    ("gpu_compute", "gpu_compute"),
    ("gpu_memcpy", "gpu_memcpy"),
    ("gpu_memset", "gpu_memset"),
    ("communication", "comm_kernel"),
    ("dataloader", "dataloader"),
    ("host_runtime", "host_runtime"),
    ("optimizer", "optimizer"),
    ("backward", "backward"),
    ("forward", "forward"),
)
CPU_PRIORITY = (
    ("dataloader", "dataloader"),
    ("optimizer", "optimizer"),
    ("backward", "backward"),
    ("forward", "forward"),
    ("communication", "comm_op"),
    ("dataloader", "phase_data"),
    ("optimizer", "phase_optimizer"),
    ("backward", "phase_backward"),
    ("forward", "phase_forward"),
)


@dataclass(frozen=True)
class Breakdown:
    """Everything the advisor reads from one trace set. Times are integer nanoseconds unless named _ms.

    ``per_step``: one row per (rank, step): ``rank, step, start_ns, end_ns, step_ns`` and one column per
    :data:`CATEGORIES` (ns); the categories of a row sum to ``step_ns`` exactly.
    ``per_rank``: ``rank, steps, step_ms`` (median), ``work_ms`` (median step minus exposed communication),
    ``exposed_comm_ms`` (median); a rank's total collective time is not per rank (see ``comm_total_ns``).
    ``kernels``: ``name, kclass, count, total_ns, mean_us, low_precision`` (GPU kernels inside steps).
    ``ops``: ``name, count, total_ns, mean_us`` (host operators inside steps, inclusive time).
    ``compiled_spans``: host spans of torch.compile'd code inside steps, of any host kind (the region
    annotation is a ``user_annotation``, so the op table alone does not show it).
    ``optimizers``: classes of the optimizers stepped inside steps (``Optimizer.step#AdamW.step``), most
    frequent first.
    ``flops``: FLOPs of the steps' matmul/convolution/attention ops counted from their recorded shapes.
    """

    device: str  # "gpu" | "cpu"
    device_name: str
    ranks: tuple[int, ...]
    n_steps: int
    steps_inferred: bool
    per_step: pd.DataFrame
    per_rank: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame
    kernel_class_ns: dict[str, int]
    gpu_busy_ns: int
    comm_total_ns: int
    comm_overlapped_ns: int
    syncs: parts.SyncCounts
    memory: parts.MemoryPeak
    host: parts.HostStats
    cpu_matmul: parts.CpuMatmul
    warnings: tuple[str, ...]
    compiled_spans: int = 0
    optimizers: tuple[str, ...] = ()
    flops: TraceFlops | None = (
        None  # matmul/conv/attention FLOPs from record_shapes (profilers.efficiency.flops)
    )
    python_idle: pd.DataFrame = field(default_factory=py_idle.empty)  # profilers.trace.python_idle
    world_size: int | None = None  # distributedInfo's, when the trace records it
    # the profiled process's CUDA runtime, when the trace records it
    cuda_runtime: str | None = None

    @property
    def gpu_arch(self) -> GpuArch | None:
        """The GPU's architecture read from its kernel names, for a GPU trace whose device name the peak table
        does not know ("GPU" when ``deviceProperties`` is missing): see :mod:`profilers.efficiency.arch`."""
        if (
            self.device != "gpu"
            or device_peak(self.device_name) is not None
            or not len(self.kernels)
        ):
            return None
        if is_non_gpu(self.device_name):  # an MTIA's kernels name no GPU architecture
            return None
        return infer_arch(self.kernels["name"].astype(str))

    @property
    def device_label(self) -> str:
        """What to call the device on a card: its recorded name ("Tesla V100-SXM2-16GB"), else the architecture
        its kernel names show ("Volta GPU (inferred)"), else "GPU" / "CPU"; never "CPU / CPU".
        An accelerator that is not a GPU is named by its family, its peak unknown ("MTIA accelerator
        (peak unknown)")."""
        if is_non_gpu(self.device_name):
            return shown_name(self.device_name)
        if self.device_name not in ("GPU", "CPU"):
            return self.device_name
        arch = self.gpu_arch
        return (
            f"{arch.name} GPU (inferred from kernel names)"
            if arch is not None
            else self.device.upper()
        )

    @property
    def total_step_ns(self) -> int:
        return int(self.per_step["step_ns"].sum())

    @property
    def step_time_ms(self) -> float:
        """Median step time over all (rank, step) rows."""
        return float(np.median(self.per_step["step_ns"])) / 1e6 if len(self.per_step) else 0.0

    def category_ns(self) -> dict[str, int]:
        return {c: int(self.per_step[c].sum()) for c in CATEGORIES}

    def shares(self) -> dict[str, float]:
        """Share of all step time per category; sums to 1 (0 for an empty breakdown)."""
        total = self.total_step_ns
        return {c: (v / total if total else 0.0) for c, v in self.category_ns().items()}

    def share(self, category: str) -> float:
        return self.shares()[category]

    @property
    def gpu_busy_share(self) -> float:
        total = self.total_step_ns
        return self.gpu_busy_ns / total if total else 0.0

    @property
    def kernel_total_ns(self) -> int:
        return int(sum(self.kernel_class_ns.values()))

    def kernel_class_share(self, kclass: str) -> float:
        total = self.kernel_total_ns
        return self.kernel_class_ns.get(kclass, 0) / total if total else 0.0

    @property
    def straggler_call(self) -> StragglerCall:
        """Whether a rank holds the others back, and why or why not (:mod:`profilers.jobs.straggler`)."""
        return find_in_steps(self.per_step)

    @property
    def straggler(self) -> Straggler | None:
        """The marked straggler of :attr:`straggler_call`, ``None`` when no rank stands out."""
        return self.straggler_call.straggler


def event_sets(
    trace: Trace, rank: int, masks: dict[str, np.ndarray] | None = None
) -> dict[str, Intervals]:
    """The time covered by each event set of :func:`breakdown_parts.category_masks` on one rank; the host work
    sets without their threads' time inside communication ops (:func:`breakdown_parts.host_work_sets`)."""
    ev = trace.events
    masks = parts.category_masks(ev) if masks is None else masks
    sel = ev["rank"].to_numpy() == rank
    starts, ends = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    sets = {
        key: Intervals.of(starts[sel & m], ends[sel & m])
        for key, m in masks.items()
        if key not in parts.HOST_WORK
    }
    out = {**sets, **parts.host_work_sets(ev, sel, masks)}
    if "closure" in out and len(out["closure"]):
        # forward and backward run inside optimizer.step(closure): the optimizer keeps only its own update; the
        # closure's time no operator covers is the forward's Python (its backward ops claim their own time)
        out["optimizer"] = out["optimizer"] - out["closure"]
        out["phase_optimizer"] = out["phase_optimizer"] - out["closure"]
        out["phase_forward"] = out["phase_forward"] | out["closure"]
    return out


def claim(sets: dict[str, Intervals], on_gpu: bool) -> dict[str, Intervals]:
    """The priority claim: each category's time not claimed before it (unclipped; no ``other``)."""
    claimed = Intervals.empty()
    out: dict[str, Intervals] = {}
    for cat, key in GPU_PRIORITY if on_gpu else CPU_PRIORITY:
        mine = sets[key] - claimed
        out[cat] = out[cat] | mine if cat in out else mine
        claimed = claimed | sets[key]
    return out


def claimed_by_category(trace: Trace, rank: int) -> dict[str, Intervals]:
    """On one rank, the time each category of :data:`CATEGORIES` claims inside its steps (``other`` too)."""
    steps = trace.steps[trace.steps["rank"] == rank]
    in_steps = Intervals.of(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy())
    claims = claim(event_sets(trace, rank), rank in parts.gpu_ranks(trace.events))
    out = {
        cat: (claims[cat] & in_steps) if cat in claims else Intervals.empty() for cat in CATEGORIES
    }
    taken = Intervals.empty()
    for piece in claims.values():
        taken = taken | piece
    out["other"] = in_steps - taken
    return out


def breakdown(trace: Trace) -> Breakdown:
    """Compute the :class:`Breakdown` of a normalised trace (all ranks, all steps)."""
    ev = trace.events
    masks = parts.category_masks(ev)
    rows: list[pd.DataFrame] = []
    busy_ns = comm_total = comm_overlap = 0
    has_gpu_rank = parts.gpu_ranks(ev)
    ranks = ev["rank"].to_numpy()
    python_rows = (ev["kind"] == "python_function").to_numpy() & (ev["step"].to_numpy() >= 0)
    python_charged: dict[str, int] = {}
    for _, steps in trace.steps.groupby("rank", sort=True):
        rank = int(steps["rank"].iloc[0])  # the group's key
        lo, hi = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
        sets = event_sets(trace, rank, masks)
        on_gpu = rank in has_gpu_rank
        claims = claim(sets, on_gpu)
        out = steps[["rank", "step", "start_ns", "end_ns"]].reset_index(drop=True)
        out["step_ns"] = hi - lo
        for cat in CATEGORIES:
            out[cat] = (
                claims[cat].covered_in(lo, hi)
                if cat in claims
                else np.zeros(len(out), dtype=np.int64)
            )
        out["other"] = out["step_ns"] - out[list(CATEGORIES[:-1])].sum(axis=1)
        device_busy = sets["gpu_compute"] | sets["gpu_memcpy"] | sets["gpu_memset"]
        comm = sets["comm_kernel"] if on_gpu else sets["comm_op"]
        # On a CPU the work a collective can hide under is the host work sets, which never hold a collective.
        work = (
            device_busy
            if on_gpu
            else sets["dataloader"] | sets["optimizer"] | sets["backward"] | sets["forward"]
        )
        busy_ns += int((device_busy | sets["comm_kernel"]).covered_in(lo, hi).sum())
        if on_gpu and python_rows.any():
            idle = Intervals.of(lo, hi) - (device_busy | sets["comm_kernel"])
            for name, ns in py_idle.python_idle(ev, python_rows & (ranks == rank), idle).items():
                python_charged[name] = python_charged.get(name, 0) + ns
        comm_total += int(comm.covered_in(lo, hi).sum())
        comm_overlap += int((comm & work).covered_in(lo, hi).sum())
        rows.append(out)
    per_step = pd.concat(rows, ignore_index=True) if rows else _empty_steps()
    in_step = ev["step"].to_numpy() >= 0
    kernels = parts.kernel_table(ev, in_step)
    device = "gpu" if has_gpu_rank else "cpu"
    return Breakdown(
        device=device,
        device_name=trace.device_name,
        ranks=trace.ranks,
        n_steps=int(per_step["step"].nunique()),
        steps_inferred=trace.steps_inferred,
        per_step=per_step,
        per_rank=parts.rank_table(per_step),
        kernels=kernels,
        ops=parts.op_table(ev, in_step),
        kernel_class_ns=parts.kernel_class_ns(ev, kernels, in_step),
        gpu_busy_ns=busy_ns,
        comm_total_ns=comm_total,
        comm_overlapped_ns=comm_overlap,
        syncs=parts.sync_counts(ev, in_step, max(len(per_step), 1)),
        memory=parts.memory_peak(trace),
        host=parts.host_stats(ev, in_step, max(len(per_step), 1)),
        cpu_matmul=parts.cpu_matmul(ev, in_step),
        warnings=trace.warnings,
        python_idle=py_idle.table(python_charged),
        compiled_spans=parts.compiled_spans(ev, in_step),
        optimizers=parts.optimizer_classes(ev, in_step),
        flops=trace_flops(ev),
        world_size=trace.world_size,
        cuda_runtime=trace.cuda_runtime,
    )


def _empty_steps() -> pd.DataFrame:
    cols = ["rank", "step", "start_ns", "end_ns", "step_ns", *CATEGORIES]
    return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in cols})


__all__ = [
    "Breakdown",
    "breakdown",
    "claim",
    "claimed_by_category",
    "event_sets",
    "CATEGORIES",
    "GPU_PRIORITY",
    "CPU_PRIORITY",
]
