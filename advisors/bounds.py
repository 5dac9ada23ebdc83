"""Bounds that mean something: what a fix can gain at most, from the time that fix can touch.

A finding's ``upper_bound_speedup`` is ``1 / (1 − severity)``: the whole of its time at stake vanishing. For a
fix that acts on only part of that time, the bound comes from that part instead, stated with its assumption:

- ``torch_compile``: the unfused elementwise/normalization kernels' time (Triton kernels are fused already)
  plus the GPU's launch gaps (``Facts.launch_idle``) — *if fusion made those kernels free and the gaps
  vanished*; on a CPU, the operators' time outside matmuls (where fusion acts).
- ``channels_last``: convolution time — *if the convolutions took no time at all*.
- ``cuda_graphs`` (a GPU step): the GPU's launch gaps (``Facts.launch_idle``: idle time neither the loader nor a
  collective explains) — *if they vanished and the kernels ran back to back*; a replayed graph removes the
  host's per-launch cost, not the kernels' own time.
- the data fixes (workers, cached decoded samples, prefetching): the time the run's steady steps spent drawing
  batches, timed *without* the profiler (``steps.jsonl``'s ``data_ms``: fetch, decode, collate, the copy to the
  device) — *if all of it vanished*. The profiled window's loader share was the bound before, and a cached
  dataset beat it (14.2x measured against a bound of 8.9x): under the profiler every operator of the forward and
  backward pays the profiler's per-event cost while the decode in Python does not, so the window's share of
  the loader is smaller than the unprofiled steps' share. This bound replaces the finding's (``replaces``).

Each bound is ``1 / (1 − share)``; a measured gain above it means the bound was wrong for this run (a
mis-attributed time, or a fix that also acted elsewhere) and is flagged as such (:func:`exceeds`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from advisors.facts import Facts

_CONV = re.compile(r"conv|wgrad|dgrad|fprop|implicit_convolve", re.IGNORECASE)
#: A measured speed-up above its bound by more than this is flagged (measurement noise stays below).
EXCEED_TOLERANCE = 0.0


@dataclass(frozen=True)
class Bound:
    """The most ``fix_id`` can gain: the share of step time it can touch, the speed-up, and the assumption."""

    fix_id: str
    share: float
    speedup: float | None
    assumption: str
    replaces: bool = False  # measured more directly than the finding's share: it stands even when larger

    def to_json(self) -> dict[str, Any]:
        return {"fix": self.fix_id, "share": round(self.share, 4), "speedup": self.speedup,
                "assumption": self.assumption}


def _bound(fix_id: str, share: float, assumption: str, replaces: bool = False) -> Bound:
    share = min(max(share, 0.0), 1.0)
    return Bound(fix_id, share, None if share >= 1.0 else round(1.0 / (1.0 - share), 3), assumption, replaces)


DATA_FIXES = ("dataloader_workers", "cache_decoded", "prefetch_pinned")


def data_bounds(f: Facts) -> dict[str, Bound]:
    """The data fixes' bound from the run's own unprofiled steps, when it recorded their batch-drawing time."""
    share = f.run.data_wait_share if f.run is not None else None
    if share is None:
        return {}
    text = (f"the steady steps' time drawing batches ({100 * share:.1f}% of the step without the profiler: fetch, "
            "decode, collate, copy) vanishes")
    return {fix: _bound(fix, share, text, replaces=True) for fix in DATA_FIXES}


def fix_bounds(f: Facts) -> dict[str, Bound]:
    """The bounds of the fixes whose reach is narrower than a finding's time (see the module docs)."""
    if not f.has_steps or f.b is None:
        return data_bounds(f)
    out: dict[str, Bound] = data_bounds(f)
    total = float(f.b.total_step_ns) or 1.0
    if f.device == "gpu":
        pointwise = f.kernel_step_share.get("elementwise", 0.0) + f.kernel_step_share.get("normalization", 0.0)
        unfused = pointwise * (1.0 - min(f.triton_kernel_share / max(sum(f.kernel_mix.get(k, 0.0) for k in (
            "elementwise", "normalization")), 1e-9), 1.0)) if f.triton_kernel_share else pointwise
        out["torch_compile"] = _bound("torch_compile", unfused + max(f.launch_idle, 0.0),
                                      f"unfused elementwise/normalization kernels ({100 * unfused:.1f}% of the "
                                      f"step) cost nothing once fused, and the launch gaps "
                                      f"({100 * max(f.launch_idle, 0.0):.1f}%) vanish")
        gaps = max(f.launch_idle, 0.0)
        out["cuda_graphs"] = _bound("cuda_graphs", gaps, f"the GPU's launch gaps ({100 * gaps:.1f}% of the step) "
                                    "vanish: the kernels, replayed from a CUDA graph, run back to back")
        k = f.b.kernels
        conv = float(k.loc[k["name"].astype(str).str.contains(_CONV), "total_ns"].sum()) / total if len(k) else 0.0
    else:
        matmul = f.cpu_matmul_fp32 + f.cpu_matmul_low + f.cpu_matmul_untyped
        rest = max(f.device_work - matmul, 0.0)
        out["torch_compile"] = _bound("torch_compile", rest,
                                      f"the operators outside matmuls ({100 * rest:.1f}% of the step) cost "
                                      "nothing once fused")
        ops = f.b.ops
        conv = min(float(ops.loc[ops["name"].astype(str).str.match(r"aten::(mkldnn_)?convolution$"),
                                 "total_ns"].sum()) / total, f.device_work) if len(ops) else 0.0
    out["channels_last"] = _bound("channels_last", conv,
                                  f"convolutions ({100 * conv:.1f}% of the step) take no time at all")
    return out


def exceeds(measured: float | None, bound: float | None) -> bool:
    """True when a measured speed-up is above its bound: the bound (its assumption) was wrong for this run."""
    return measured is not None and bound is not None and measured > bound * (1 + EXCEED_TOLERANCE)


def rest_got_faster(fix_id: str, base_rest_ms: float | None, patched_step_ms: float | None) -> str | None:
    """Why a data fix beat the data bound, when the measurement shows it: the patched step is shorter than the
    baseline's step *without* its batch drawing, so the rest of the step got faster too. Measured on the data_bound
    workload: 3.41 ms of forward/backward after each decode against 2.01 ms once batches came from memory (the
    decode leaves cold CPU caches and intra-op threads asleep for the compute after it). No bound read from the
    baseline alone can see that cost, so the bound stays, flagged with this reason."""
    if fix_id not in DATA_FIXES or base_rest_ms is None or patched_step_ms is None or patched_step_ms >= base_rest_ms:
        return None
    return (f"the rest of the step got faster too: the patched step ({patched_step_ms:.3g} ms) is shorter than the "
            f"baseline's step without its batch drawing ({base_rest_ms:.3g} ms) — the decode also slowed the compute "
            "after it (cold CPU caches, idle intra-op threads), a cost no bound read from the baseline can time")


def exceeded_text(measured: float, bound: float, why: str | None = None) -> str:
    return (f"measured {measured:.4g}x is above its upper bound {bound:.4g}x: " + (why or "the bound was wrong for "
            "this run (time mis-attributed, or the fix also acted elsewhere)"))
