"""What a memory fix did to memory, in numbers: each arm's peaks beside its step time.

Two peaks per arm, the largest over its runs:

- the profiler's peak of live tensors over the profiled steps (the ``[memory]`` events of the
  run's trace, as :func:`profilers.trace.breakdown_parts.memory_peak` reads them): the device's
  allocated bytes on a GPU, the host's on a CPU. The profiler counts what was allocated while it
  recorded, so it is the step's own tensors (activations, gradients, optimizer state made in the
  window), steadier on a CPU than the process's resident memory;
- the run's own peak (``peak_memory_mb``: its resident memory on a CPU, the CUDA allocator's peak
  on a GPU), everything the process held.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

MB = 1024**2


@dataclass(frozen=True)
class MemoryRecord:
    """The arms' peaks (MB, ``None``: not recorded) and what ``allocated`` counts (``basis``)."""

    before_allocated_mb: float | None
    after_allocated_mb: float | None
    before_peak_mb: float | None
    after_peak_mb: float | None
    basis: str  # "host tensors" (a CPU run) or "device tensors" (a GPU run)

    @property
    def allocated_change(self) -> float | None:
        """after ÷ before − 1 of the live-tensor peak (``-0.6``: 60% less)."""
        b, a = self.before_allocated_mb, self.after_allocated_mb
        return None if not b or a is None else a / b - 1

    def text(self, before_ms: float | None, after_ms: float | None) -> str:
        """``live host tensors 612 → 210 MB (-66%); run peak 900 → 700 MB; step 120.0 → 150.0 ms
        (+25%)``: the memory it saved beside the step time it cost."""
        parts = []
        if self.before_allocated_mb is not None or self.after_allocated_mb is not None:
            change = self.allocated_change
            parts.append(
                f"live {self.basis} {_mb(self.before_allocated_mb)} → "
                f"{_mb(self.after_allocated_mb)} MB" + (f" ({change:+.0%})" if change else "")
            )
        if self.before_peak_mb is not None or self.after_peak_mb is not None:
            parts.append(f"run peak {_mb(self.before_peak_mb)} → {_mb(self.after_peak_mb)} MB")
        if before_ms and after_ms:
            parts.append(
                f"step {before_ms:.1f} → {after_ms:.1f} ms ({after_ms / before_ms - 1:+.0%})"
            )
        return "; ".join(parts)

    def bars(self) -> dict[str, tuple[float | None, float | None]]:
        """``{peak's name: (before MB, after MB)}`` of the peaks either arm recorded, named as
        :meth:`text` names them: what a chart of them draws."""
        out: dict[str, tuple[float | None, float | None]] = {}
        if self.before_allocated_mb is not None or self.after_allocated_mb is not None:
            out[f"peak of live {self.basis}"] = (self.before_allocated_mb, self.after_allocated_mb)
        if self.before_peak_mb is not None or self.after_peak_mb is not None:
            out["run peak"] = (self.before_peak_mb, self.after_peak_mb)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "before_peak_allocated_mb": self.before_allocated_mb,
            "after_peak_allocated_mb": self.after_allocated_mb,
            "peak_allocated_change": None
            if self.allocated_change is None
            else round(self.allocated_change, 4),
            "before_peak_memory_mb": self.before_peak_mb,
            "after_peak_memory_mb": self.after_peak_mb,
        }

    @classmethod
    def from_json(cls, data: Any) -> MemoryRecord | None:
        """Read back :meth:`to_json`, or the record's own field names (how a stored ladder wrote its
        rounds' peaks before each round wrote itself)."""
        if not isinstance(data, dict):
            return None
        return cls(
            before_allocated_mb=data.get(
                "before_peak_allocated_mb", data.get("before_allocated_mb")
            ),
            after_allocated_mb=data.get("after_peak_allocated_mb", data.get("after_allocated_mb")),
            before_peak_mb=data.get("before_peak_memory_mb", data.get("before_peak_mb")),
            after_peak_mb=data.get("after_peak_memory_mb", data.get("after_peak_mb")),
            basis=str(data.get("basis") or "host tensors"),
        )


def _mb(x: float | None) -> str:
    return "?" if x is None else f"{x:.0f}"


@lru_cache(maxsize=64)
def live_peak(run_dir: str) -> tuple[float | None, bool]:
    """(the profiler's peak of live tensors in the run's trace, MB — ``None``: no trace or no
    ``[memory]`` events —, whether it is a device's)."""
    from profilers.errors import StepwiseError
    from profilers.trace.breakdown_parts import memory_peak
    from profilers.trace.load import load_trace

    if not any(Path(run_dir).glob("tb/*.pt.trace.json*")):
        return None, False
    try:
        m = memory_peak(load_trace(run_dir))
    except (StepwiseError, OSError, ValueError):
        return None, False
    if m.device_allocated_bytes:
        return round(m.device_allocated_bytes / MB, 1), True
    return (round(m.host_allocated_bytes / MB, 1) if m.host_allocated_bytes else None), False


def _largest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def memory_record(before: Any, after: Any) -> MemoryRecord:
    """The peaks of two arms (:class:`~advisors.experiments.experiment.Arm`)."""
    peaks = {
        side: [live_peak(o.run_dir) for o in arm.outcomes if o.run_dir]
        for side, arm in (("before", before), ("after", after))
    }
    device = any(on_device for p in peaks.values() for _, on_device in p)
    return MemoryRecord(
        before_allocated_mb=_largest(mb for mb, _ in peaks["before"]),
        after_allocated_mb=_largest(mb for mb, _ in peaks["after"]),
        before_peak_mb=_round(before.peak_memory_mb),
        after_peak_mb=_round(after.peak_memory_mb),
        basis="device tensors" if device else "host tensors",
    )


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 1)
