"""``efficiency(breakdown) -> Efficiency``: achieved FLOP/s against the device's peak (model FLOPs utilisation).

Achieved: the FLOPs of the steps' matmul, convolution and attention ops (:mod:`profilers.efficiency.flops`, counted
from record_shapes' ``Input Dims``) over the steps' time, per device (summed over ranks, divided by the ranks'
summed step time). Peak: the device's dense peak for the dtype holding most of those FLOPs
(:mod:`profilers.efficiency.peaks`). MFU = achieved / peak.

MFU can never exceed the share of the step the device is busy (a device busy half the step cannot run at more
than half its peak over the step): a higher figure means the FLOP count or the peak is wrong for this trace, so
it is clamped to the busy share and ``clamped`` says so. When the shapes or the device are unknown, ``mfu`` is
``None`` and ``reason`` says which. Rules of thumb for training (named, for the advice): under
:data:`MFU_PROBLEM` is a problem, :data:`MFU_TYPICAL` typical, :data:`MFU_GOOD` good.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profilers.trace.breakdown import Breakdown
from profilers.efficiency.peaks import DevicePeak, device_peak, dtype_key
from profilers.efficiency.accelerator import PEAK_UNKNOWN, is_non_gpu

MFU_PROBLEM = 0.20  # under this, kernels are small, memory-bound or waiting: a problem
MFU_TYPICAL = (0.30, 0.45)  # what well-run training typically reaches
MFU_GOOD = (0.45, 0.60)  # good; above, little is left for a cheap fix


@dataclass(frozen=True)
class Efficiency:
    """Achieved throughput against peak. TFLOP/s; ``mfu`` 0..1 or ``None`` with a ``reason``."""

    achieved_tflops: float | None
    peak_tflops: float | None
    peak_basis: str | None  # e.g. "H100 SXM, bf16 (NVIDIA H100 datasheet, dense)"
    mfu: float | None
    flops_source: str
    reason: str | None = None
    clamped: bool = False  # the raw ratio exceeded the device-busy share and was clamped to it
    busy_share: float | None = None
    dtype: str | None = None  # the dtype key the peak is for ("bf16", "fp32"…)
    per_step_tflops: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "achieved_tflops": _r(self.achieved_tflops),
            "peak_tflops": self.peak_tflops,
            "peak_basis": self.peak_basis,
            "mfu": _r(self.mfu),
            "flops_source": self.flops_source,
            "reason": self.reason,
            "clamped": self.clamped,
            "busy_share": _r(self.busy_share),
            "dtype": self.dtype,
            "per_step_tflops": [_r(v) for v in self.per_step_tflops],
        }

    def phrase(self) -> str:
        """One line: "MFU 12.3% (41.2 of 335 TFLOP/s, V100 SXM2, fp16)" or why there is none; a CPU's figures
        in GFLOP/s ("MFU 0.9% (0.21 of 23.4 GFLOP/s, …)"), never a raw 0.0233994 TFLOP/s; a rate far under a GPU's
        peak in its own unit ("3.78 GFLOP/s of 15.7 TFLOP/s")."""
        if self.mfu is None:
            said = f"{flops_rate(self.achieved_tflops)} achieved; " if self.achieved_tflops else ""
            return f"MFU unknown: {said}{self.reason}"
        flag = (
            " (clamped to the device-busy share: the count or the peak does not fit this trace)"
            if self.clamped
            else ""
        )
        share = mfu_percent(self.mfu)
        achieved, peak = self.achieved_tflops or 0.0, self.peak_tflops or 0.0
        scale, unit = _flops_unit(peak)
        if _flops_unit(achieved)[1] == unit:  # "0.21 of 23.4 GFLOP/s"
            rates = f"{_sig3(achieved * scale)} of {_sig3(peak * scale)} {unit}"
        else:  # "3.78 GFLOP/s of 15.7 TFLOP/s", never "0.00378 of 15.7 TFLOP/s"
            rates = f"{flops_rate(achieved)} of {flops_rate(peak)}"
        return f"MFU {share}% ({rates}, {self.peak_basis}){flag}"


def mfu_percent(mfu: float) -> str:
    """An MFU (0..1) as every surface writes it, without the % sign: ``1.5`` (``0.42`` under 1%)."""
    return f"{100 * mfu:.1f}" if mfu >= 0.01 else f"{100 * mfu:.2g}"


def _flops_unit(tflops: float) -> tuple[float, str]:
    """The unit a rate of ``tflops`` reads best in: TFLOP/s from 1 up, GFLOP/s under (a CPU's matmul peak). One
    unit for every GPU, so two peaks compare at a glance ("989 TFLOP/s", "2,250 TFLOP/s"): never PFLOP/s."""
    return (1.0, "TFLOP/s") if tflops >= 1.0 else (1e3, "GFLOP/s")


def _sig3(value: float) -> str:
    """Three significant digits, never an exponent: 989, 41.2, 0.21, 0.000123; from 1,000 up the whole number with
    thousands separators ("2,250", "1,000": a peak's zeros are digits, never stripped)."""
    if value == 0:
        return "0"
    if abs(value) >= 999.5:
        return f"{round(value):,}"
    text = f"{value:.3g}"
    if "e" not in text:
        return text
    return f"{value:.{max(0, 2 - int(f'{value:e}'.split('e')[1]))}f}".rstrip("0").rstrip(".")


def flops_rate(tflops: float | None) -> str:
    """A FLOP rate with its unit (``tflops`` in TFLOP/s), three significant digits: "41.2 TFLOP/s",
    "2,250 TFLOP/s", "0.21 GFLOP/s". Every FLOP rate a page, report or command line prints goes through it (or
    :meth:`Efficiency.phrase`, which does)."""
    if tflops is None:
        return "—"
    scale, unit = _flops_unit(tflops)
    return f"{_sig3(tflops * scale)} {unit}"


def from_json(doc: dict[str, Any]) -> Efficiency:
    """The :class:`Efficiency` that :meth:`Efficiency.to_json` wrote (``analyze --json``'s ``efficiency``), so a
    reader of the JSON says it in :meth:`Efficiency.phrase`'s words."""
    return Efficiency(
        achieved_tflops=doc.get("achieved_tflops"),
        peak_tflops=doc.get("peak_tflops"),
        peak_basis=doc.get("peak_basis"),
        mfu=doc.get("mfu"),
        flops_source=doc.get("flops_source", ""),
        reason=doc.get("reason"),
        clamped=bool(doc.get("clamped")),
        busy_share=doc.get("busy_share"),
        dtype=doc.get("dtype"),
        per_step_tflops=tuple(doc.get("per_step_tflops") or ()),
    )


def efficiency(
    b: Breakdown, cpu_peak_tflops: float | None = None, gpu_model: str | None = None
) -> Efficiency:
    """The efficiency of a breakdown; ``cpu_peak_tflops`` is a CPU run's measured matmul peak (a calibration
    recorded with the run), the only peak a CPU has here; ``gpu_model`` a GPU model the user named (one of
    :data:`~profilers.efficiency.peaks.PEAK_NAMES`) for a trace whose device the peak table does not know."""
    fl = b.flops
    busy = b.gpu_busy_share if b.device == "gpu" else _cpu_busy(b)
    if fl is None or fl.with_shapes == 0:
        why = (
            "the trace records no operator shapes (profile with record_shapes=True)"
            if fl is None or fl.without_shapes or not fl.unsized
            else "no matmul, convolution or attention op could be sized"
        )
        return Efficiency(None, None, None, None, flops_source="none", reason=why, busy_share=busy)
    total_ns = b.total_step_ns
    achieved = fl.total / total_ns / 1e3 if total_ns else 0.0
    source = (
        f"record_shapes: {fl.with_shapes} matmul/conv/attention ops with shapes"
        + (
            f", {fl.unsized} of them not sizeable (forward convolutions without a backward to read the output from)"
            if fl.unsized
            else ""
        )
        + (f", {fl.without_shapes} without shapes" if fl.without_shapes else "")
    )
    steps = b.per_step
    per_step = tuple(
        fl.per_step.get((int(r), int(s)), 0.0) / float(ns) / 1e3
        for r, s, ns in zip(steps["rank"], steps["step"], steps["step_ns"])
        if ns > 0
    )
    dtype = max(fl.by_dtype, key=fl.by_dtype.__getitem__) if fl.by_dtype else ""
    key = dtype_key(dtype)
    tf32 = _tf32_share(b) if b.device == "gpu" and key == "fp32" else 0.0
    if (
        tf32 >= 0.5
    ):  # fp32 tensors, but cuBLAS ran them on TF32 Tensor Cores (allow_tf32 / "high" precision)
        key = "tf32"
    base = Efficiency(
        achieved, None, None, None, source, busy_share=busy, dtype=key, per_step_tflops=per_step
    )
    if b.device == "cpu":
        if not cpu_peak_tflops:
            return _with(
                base,
                reason="a CPU run's peak is its cores' measured matmul rate, and this run has "
                "no calibration recorded",
            )
        return _ratio(
            base, cpu_peak_tflops, f"this host's cores, measured {key or 'fp32'} matmul peak", busy
        )
    if is_non_gpu(b.device_name):
        reason = (
            f"the {b.device_name} accelerator's {PEAK_UNKNOWN}: it is not a GPU, so no GPU's "
            "peak applies"
        )
        return _with(base, reason=reason)
    peak = device_peak(b.device_name)
    picked = peak is None and gpu_model is not None and (peak := device_peak(gpu_model)) is not None
    if peak is None:
        return _with(
            base,
            reason=f"the device {b.device_name!r} is not in the peak table: name its model "
            "(the Analysis page's GPU model picker)",
        )
    if key is None:
        return _with(base, reason=f"no peak for the ops' dtype {dtype or '(not recorded)'!r}")
    value = peak.tflops.get(key)
    if not value:
        return _with(base, reason=f"the {peak.name} has no fast path for {key}")
    return _ratio(
        base, value, _basis(peak, key) + (", the model you picked" if picked else ""), busy
    )


def _tf32_share(b: Breakdown) -> float:
    """The share of the matmul kernels' time in kernels built for TF32 (``sm90_xmma_gemm_f32f32_tf32f32_…``,
    ``…_s1688tf32gemm_…``, ``cutlass_…_tf32_…``): fp32 ops whose FLOPs ran at the TF32 Tensor Core rate."""
    k = b.kernels
    if not len(k) or "kclass" not in k:
        return 0.0
    mm = k[k["kclass"] == "matmul"]
    total = float(mm["total_ns"].sum())
    if total <= 0:
        return 0.0
    return (
        float(mm.loc[mm["name"].astype(str).str.contains("tf32", case=False), "total_ns"].sum())
        / total
    )


def _ratio(base: Efficiency, peak: float, basis: str, busy: float | None) -> Efficiency:
    raw = (base.achieved_tflops or 0.0) / peak
    clamped = busy is not None and raw > busy
    return Efficiency(
        base.achieved_tflops,
        peak,
        basis,
        min(raw, busy) if clamped and busy is not None else raw,
        base.flops_source,
        None,
        clamped,
        busy,
        base.dtype,
        base.per_step_tflops,
    )


def _with(base: Efficiency, reason: str) -> Efficiency:
    return Efficiency(
        base.achieved_tflops,
        None,
        None,
        None,
        base.flops_source,
        reason,
        False,
        base.busy_share,
        base.dtype,
        base.per_step_tflops,
    )


def _basis(peak: DevicePeak, key: str) -> str:
    note = (
        " without TF32"
        if key == "fp32" and peak.ampere_or_newer
        else " Tensor Cores, as the matmul kernels' names show"
        if key == "tf32"
        else ""
    )
    return f"{peak.name}, {key}{note} ({peak.source}, dense)"


def _cpu_busy(b: Breakdown) -> float | None:
    shares = b.shares()
    return (
        sum(shares.get(c, 0.0) for c in ("forward", "backward", "optimizer"))
        if b.total_step_ns
        else None
    )


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)
