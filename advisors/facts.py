"""``derive(observation) -> Facts``: the numbers every rule reads, computed once, in one place.

All shares are of total step time (summed over ranks and steps), 0..1, unless named otherwise. A field is
``None`` when the observation cannot say (a CPU trace has no GPU busy share, a run without a trace has no
breakdown). Rules never recompute these: a number with a meaning is defined here, once.

GPU idle time that the input pipeline does not explain (``host_idle_share``) is split between communication
and host by the share of the device timeline spent in exposed collectives: in a step organised around
collectives, the host gaps between them are spent preparing and awaiting them (bucketing, split-size
exchange, waits), while in a step without collectives they are plain dispatch overhead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Mapping

import pandas as pd

from advisors.observation import Observation, RunFacts
from profilers.jobs.agent_summaries import is_run_views
from profilers.layers import Layers
from profilers.trace import kernel_classes as kc
from profilers.trace.breakdown import Breakdown
from profilers.jobs.straggler import Straggler
from profilers.efficiency.mfu import Efficiency, efficiency
from profilers.efficiency.arch import GpuArch
from profilers.efficiency.peaks import DevicePeak, device_peak
from profilers.trace.memory_snapshot import MemorySnapshot
from profilers.run.run_config import RunConfig
from profilers.telemetry.threads import ThreadUse
from profilers.telemetry.summary import TelemetrySummary

_SINGLE_LOADER = re.compile(r"_SingleProcessDataLoaderIter")
_MULTI_LOADER = re.compile(r"_MultiProcessingDataLoaderIter")
_COMPILED = re.compile(
    r"CompiledFunction|Torch-Compiled Region|CompiledFxGraph|triton_", re.IGNORECASE
)
_CONV = re.compile(r"conv|cudnn_convolution|wgrad|dgrad|fprop|implicit_convolve", re.IGNORECASE)
_FUSED_STEP = re.compile(r"^aten::_fused_(?:adamw?|sgd|adagrad)_?$", re.IGNORECASE)
_FOREACH_STEP = re.compile(r"^aten::_foreach_", re.IGNORECASE)


@dataclass(frozen=True)
class RankFigures:
    """One rank's medians from the summary its agent wrote (ms): step, work outside collectives, collectives."""

    rank: int
    step_ms: float
    work_ms: float
    comm_ms: float


@dataclass(frozen=True)
class Facts:
    """Derived numbers (see the module docs). ``b`` is the breakdown itself, for evidence tables.

    Every field has a default that means "the observation does not say" (no steps, nothing measured), so a
    test or an example states only what it is about: ``Facts(has_steps=True, device="cpu", shares={...})``."""

    b: Breakdown | None = None
    run: RunFacts | None = None
    spec: RunConfig | None = None
    has_steps: bool = False
    device: str | None = None  # "gpu" | "cpu" | None (no trace)
    n_steps: int = 0
    n_ranks: int = 0
    steps_inferred: bool = False
    step_ms: float = 0.0
    shares: Mapping[str, float] = field(default_factory=dict)
    gpu_busy: float | None = None
    loader_exposed: float = 0.0
    loader_total: float = 0.0  # inclusive DataLoader op time (0 when the trace shows no loader ops)
    loader_mode: str | None = None  # "single_process" | "multi_process" | None
    pageable_copy: float = 0.0
    pinned_copy: float = 0.0
    kernel_step_share: Mapping[str, float] = field(
        default_factory=dict
    )  # kernel class -> kernel time / step time
    kernel_mix: Mapping[str, float] = field(
        default_factory=dict
    )  # kernel class -> share of kernel time
    gemm_low_precision: float | None = (
        None  # fraction of GEMM work in bf16/fp16/tf32 (kernel names or op dtypes)
    )
    cpu_matmul_fp32: float = 0.0
    cpu_matmul_low: float = 0.0
    cpu_matmul_untyped: float = 0.0
    compiled: bool = False
    has_conv: bool = False
    kernels_per_step: float = 0.0
    median_kernel_us: float = 0.0
    syncs_per_step: float = 0.0
    malloc_free_per_step: float = 0.0
    comm_exposed: float = 0.0
    comm_total: float = 0.0
    comm_overlap_fraction: float | None = None  # overlapped / total collective time
    host_idle: float = 0.0  # GPU idle and not waiting for the loader (GPU ranks only)
    comm_device_fraction: float = 0.0  # exposed collective time / device busy time
    memory_peak_share: float | None = None
    compiled_spans: int = 0  # host spans of torch.compile'd code inside steps
    triton_kernel_share: float = 0.0  # share of kernel time in Triton kernels (Inductor's output)
    comm_kinds: Mapping[str, float] = field(
        default_factory=dict
    )  # collective family -> share of collective time
    snapshot: MemorySnapshot | None = None  # an allocator snapshot, when that is what was analysed
    device_memory_bytes: int | None = (
        None  # the device total the user stated (snapshots do not record it)
    )
    optimizer_impl: str | None = (
        None  # "fused" | "foreach" | "single_tensor" | None (no optimizer step seen)
    )
    optimizer_class: str | None = (
        None  # e.g. "AdamW", from the profiler's "Optimizer.step#AdamW.step" span
    )
    efficiency: Efficiency | None = (
        None  # achieved FLOP/s against the device's peak (profilers.efficiency.mfu)
    )
    # A run whose ranks wrote summaries at capture time (``launch --trace-ranks``): all N ranks' median step, work
    # (step minus collective time) and collective time, where the breakdown holds only the k traced ranks; and the
    # straggler those summaries name (``job.straggler``, marked by profilers.jobs.straggler), its excess work over the
    # median rank's step.
    summary_ranks: tuple[RankFigures, ...] = ()
    summary_straggler: Straggler | None = None
    layers: Layers = field(
        default_factory=Layers
    )  # per-module rows (profilers.layers), when recorded

    @property
    def telemetry(self) -> TelemetrySummary | None:
        """A stored run's telemetry over its steady steps (``None`` for a trace or snapshot alone)."""
        return self.run.telemetry if self.run is not None else None

    @property
    def threads(self) -> ThreadUse | None:
        """A launched script's threads and cores as its agent recorded them (``None``: not recorded)."""
        return self.run.threads if self.run is not None else None

    @property
    def device_work(self) -> float:
        """Share of step time the device spends working: on a GPU, kernels, copies and sets outside exposed
        collectives; on a CPU, operators in forward, backward and the optimizer (0 without steps)."""
        if not self.has_steps:
            return 0.0
        parts = (
            ("gpu_compute", "gpu_memcpy", "gpu_memset")
            if self.device == "gpu"
            else ("forward", "backward", "optimizer")
        )
        return sum(self.shares.get(c, 0.0) for c in parts)

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation (0..1), ``None`` when the shapes or the device's peak are unknown."""
        return self.efficiency.mfu if self.efficiency is not None else None

    @property
    def cpu_bf16_fast(self) -> bool | None:
        """On a CPU run: whether bf16 matmuls beat fp32 there (measured by the run's calibration, else its CPU
        flags); ``None`` when not recorded (an uploaded trace) or not a CPU run."""
        return self.run.cpu_bf16_fast if self.run is not None and self.device == "cpu" else None

    @property
    def device_peak(self) -> DevicePeak | None:
        """The GPU's peak table entry from its name (``None``: a CPU, or a device not in the table)."""
        return (
            device_peak(self.b.device_name) if self.b is not None and self.device == "gpu" else None
        )

    @property
    def gpu_arch(self) -> GpuArch | None:
        """The GPU's architecture read from its kernel names when the trace does not name a known device
        (:mod:`profilers.efficiency.arch`); ``None`` on a CPU, for a named device, or when no name says."""
        return self.b.gpu_arch if self.b is not None and self.device == "gpu" else None

    @property
    def comm_kind(self) -> str | None:
        """The collective family holding most collective time (``all_reduce``, ``all_to_all``, ``sharded``);
        ``None`` when no named collective was seen."""
        named = {k: v for k, v in self.comm_kinds.items() if k != "other" and v > 0}
        return max(named, key=named.__getitem__) if named else None

    @property
    def comm_orchestration(self) -> float:
        """GPU-idle host time attributed to preparing/awaiting collectives."""
        return self.host_idle * min(self.comm_device_fraction, 1.0)

    @property
    def launch_idle(self) -> float:
        """GPU-idle host time left to plain dispatch overhead."""
        return self.host_idle - self.comm_orchestration

    @property
    def launch_period_us(self) -> float | None:
        """The step's time per kernel launched (µs): step time ÷ kernels per step. ``None``
        without kernels."""
        return self.step_ms * 1e3 / self.kernels_per_step if self.kernels_per_step else None

    @property
    def short_kernel_share(self) -> float | None:
        """Share of kernel time in kernels no longer, on average, than :attr:`launch_period_us`:
        kernels that end before the step's next launch can arrive, so the host cannot get ahead of
        the GPU while they run. Near 1 the GPU's work is all such launches (a launch-bound step);
        low, long kernels carry the work and the host runs ahead during them. ``None`` without a
        kernel table."""
        period = self.launch_period_us
        k = self.b.kernels if self.b is not None else None
        if period is None or k is None or not len(k) or float(k["total_ns"].sum()) <= 0:
            return None
        return float(k.loc[k["mean_us"] <= period, "total_ns"].sum()) / float(k["total_ns"].sum())

    @property
    def launch_path_share(self) -> float | None:
        """Share of the GPU's host-held idle time (:attr:`host_idle`) the host spends on the launch
        path: inside operators (forward, backward, the optimizer) and runtime calls, rather than in
        Python or work no operator covers (``other``). ``None`` when the GPU does not idle on the
        host."""
        idle = self.host_idle
        if idle <= 0:
            return None
        path = sum(
            self.shares.get(c, 0.0) for c in ("host_runtime", "optimizer", "backward", "forward")
        )
        return min(path / idle, 1.0)

    @property
    def idle_per_launch_us(self) -> float | None:
        """The GPU's host-held idle time per kernel launched (µs): ``launch_idle`` × step ÷ kernels per step.
        ``None`` without kernels. A few tens of µs is one launch's own host cost (Python, dispatcher, runtime
        call); milliseconds per launch is host work between the kernels, which no CUDA graph removes."""
        if not self.kernels_per_step:
            return None
        return max(self.launch_idle, 0.0) * self.step_ms * 1e3 / self.kernels_per_step


def derive(obs: Observation) -> Facts:
    """Compute :class:`Facts` for an observation (works with no breakdown: run facts only)."""
    ranks, straggler = _summaries(obs.job)
    return replace(
        _derive(obs),
        summary_ranks=ranks,
        summary_straggler=straggler,
        layers=obs.layers or Layers(),
    )


def _summaries(job: dict | None) -> tuple[tuple[RankFigures, ...], Straggler | None]:
    """The per-rank medians of a run's agent summaries (``Observation.job`` from ``run_job_views``) and the
    straggler the job names, if any."""
    if not is_run_views(job):
        return (), None
    ranks = tuple(
        RankFigures(int(r["rank"]), float(r["step_ms"]), float(r["work_ms"]), float(r["comm_ms"]))
        for r in job.get("per_rank", ())
        if r.get("steps")
    )
    s = job.get(
        "straggler"
    )  # marked by profilers.jobs.straggler when the views were made: read, not judged again
    if s is None or not ranks:
        return ranks, None
    return ranks, Straggler(
        int(s["culprit"]), float(s["work_ms"]), float(s["median_work_ms"]), float(s["excess_share"])
    )


def _derive(obs: Observation) -> Facts:
    b = obs.breakdown
    run = obs.run
    spec = run.spec if run else None
    if b is None or b.total_step_ns <= 0:
        return replace(
            _no_trace(b, run, spec),
            snapshot=obs.snapshot,
            device_memory_bytes=obs.device_memory_bytes,
        )
    total = float(b.total_step_ns)
    shares = b.shares()
    on_gpu = b.device == "gpu"
    busy = b.gpu_busy_share if on_gpu else None
    names = b.ops["name"].astype(str) if len(b.ops) else pd.Series(dtype=str)
    kernel_names = b.kernels["name"].astype(str) if len(b.kernels) else pd.Series(dtype=str)
    loader = b.ops[names.str.contains(kc.DATALOADER)] if len(names) else b.ops
    from_ops = float(loader["total_ns"].max()) / total if len(loader) else 0.0
    from_trace = obs.loader.total_ns / total if obs.loader is not None else 0.0
    exposed = shares["communication"]
    host_idle = max(0.0, 1.0 - (busy or 0.0) - shares["dataloader"]) if on_gpu else 0.0
    cm = b.cpu_matmul
    return Facts(
        b=b,
        run=run,
        spec=spec,
        has_steps=True,
        device=b.device,
        n_steps=b.n_steps,
        n_ranks=len(b.ranks),
        steps_inferred=b.steps_inferred,
        step_ms=b.step_time_ms,
        shares=shares,
        gpu_busy=busy,
        loader_exposed=shares["dataloader"],
        loader_total=max(from_ops, from_trace),
        loader_mode=(obs.loader.mode if obs.loader is not None else None)
        or _loader_mode(names, spec),
        pageable_copy=b.syncs.pageable_copy_ns / total,
        pinned_copy=b.syncs.pinned_copy_ns / total,
        kernel_step_share={k: v / total for k, v in b.kernel_class_ns.items()},
        kernel_mix={k: b.kernel_class_share(k) for k in b.kernel_class_ns},
        gemm_low_precision=_gemm_low_precision(b),
        cpu_matmul_fp32=cm.fp32_ns / total,
        cpu_matmul_low=cm.low_precision_ns / total,
        cpu_matmul_untyped=cm.unknown_ns / total,
        compiled=bool(
            b.compiled_spans
            or names.str.contains(_COMPILED).any()
            or kernel_names.str.contains(_COMPILED).any()
            or (spec is not None and spec.compile)
        ),
        compiled_spans=b.compiled_spans,
        triton_kernel_share=_share_by_name(b.kernels, kc.TRITON_KERNEL),
        comm_kinds=_comm_kinds(b),
        has_conv=bool(names.str.contains(_CONV).any() or kernel_names.str.contains(_CONV).any()),
        kernels_per_step=b.host.kernels_per_step,
        median_kernel_us=b.host.median_kernel_us,
        syncs_per_step=b.syncs.total_syncs,
        malloc_free_per_step=b.syncs.malloc_free,
        comm_exposed=exposed,
        comm_total=b.comm_total_ns / total,
        comm_overlap_fraction=b.comm_overlapped_ns / b.comm_total_ns if b.comm_total_ns else None,
        host_idle=host_idle,
        comm_device_fraction=(exposed / busy) if busy else 0.0,
        memory_peak_share=b.memory.device_peak_share,
        snapshot=obs.snapshot,
        device_memory_bytes=obs.device_memory_bytes,
        optimizer_impl=_optimizer_impl(names, b.optimizers),
        optimizer_class=b.optimizers[0] if b.optimizers else None,
        efficiency=efficiency(b, run.cpu_matmul_tflops if run is not None else None),
    )


def _optimizer_impl(op_names: pd.Series, optimizers: tuple[str, ...]) -> str | None:
    """How the optimizer updates parameters, read from its operators: one fused kernel per step
    (``aten::_fused_adamw_``), multi-tensor ``aten::_foreach_*`` ops, or a per-parameter loop of single-tensor
    ops (the CPU default) under an ``Optimizer.step`` span. ``None`` when the trace shows no optimizer step."""
    if len(op_names) and op_names.str.contains(_FUSED_STEP).any():
        return "fused"
    if len(op_names) and op_names.str.contains(_FOREACH_STEP).any():
        return "foreach"
    return "single_tensor" if optimizers else None


def _share_by_name(table: pd.DataFrame, pattern: re.Pattern[str]) -> float:
    """Fraction of a kernel/op table's time in rows whose name matches ``pattern``."""
    total = float(table["total_ns"].sum()) if len(table) else 0.0
    if total <= 0:
        return 0.0
    return (
        float(table.loc[table["name"].astype(str).str.contains(pattern), "total_ns"].sum()) / total
    )


def _comm_kinds(b: Breakdown) -> dict[str, float]:
    """Collective time by family (:func:`profilers.trace.kernel_classes.collective_kind`): from the collective
    kernels on a GPU, from the host collective ops (gloo, c10d) on a CPU; shares sum to 1 (empty: none)."""
    k = b.kernels
    rows = k[k["kclass"] == "communication"] if len(k) else k
    if not len(rows) and len(b.ops):
        rows = b.ops[b.ops["name"].astype(str).str.contains(kc.COMM_OP)]
    if not len(rows) or rows["total_ns"].sum() <= 0:
        return {}
    kinds = rows["name"].astype(str).map(kc.collective_kind)
    by_kind = rows.groupby(kinds.to_numpy())["total_ns"].sum()
    return {str(kind): float(ns) / float(by_kind.sum()) for kind, ns in by_kind.items()}


def _gemm_low_precision(b: Breakdown) -> float | None:
    """Fraction of GEMM work already in low precision: the larger of two independent readings — the device
    kernels' names (Tensor Core / bf16 / fp16 markers) and the host matmul ops' recorded input dtypes."""
    readings: list[float] = []
    k = b.kernels
    if len(k):
        gemm = k[k["kclass"] == "matmul"]
        if gemm["total_ns"].sum() > 0:
            readings.append(
                float(gemm.loc[gemm["low_precision"].astype(bool), "total_ns"].sum())
                / float(gemm["total_ns"].sum())
            )
    typed = b.cpu_matmul.fp32_ns + b.cpu_matmul.low_precision_ns
    if typed > 0:
        readings.append(b.cpu_matmul.low_precision_ns / typed)
    return max(readings) if readings else None


def _loader_mode(op_names: pd.Series, spec: RunConfig | None) -> str | None:
    if len(op_names) and op_names.str.contains(_SINGLE_LOADER).any():
        return "single_process"
    if len(op_names) and op_names.str.contains(_MULTI_LOADER).any():
        return "multi_process"
    if spec is not None and spec.num_workers is not None:
        return "single_process" if spec.num_workers == 0 else "multi_process"
    return None


def _no_trace(b: Breakdown | None, run: RunFacts | None, spec: RunConfig | None) -> Facts:
    return Facts(
        b=b,
        run=run,
        spec=spec,
        loader_mode=_loader_mode(pd.Series(dtype=str), spec),
        compiled=bool(spec and spec.compile),
    )
