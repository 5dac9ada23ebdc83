"""The threads a launched script trained with, as its agent recorded them at the first step (``injected.json``'s
``threads``: :mod:`stepwise_agent.inject.threads`). ``None`` for a run without that record (a sample workload, an
upload, a run from before it was recorded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ThreadUse:
    """torch's intra-op (and inter-op) threads in each training process, the training processes on this machine,
    the machine's cores and the process's CPU affinity, its DataLoader workers, its thread variables."""

    intra_op: int
    local_processes: int = 1
    inter_op: int | None = None
    cpu_count: int | None = None
    affinity: int | None = None  # cores the process may run on
    loader_workers: int | None = None
    env: Mapping[str, str] = field(
        default_factory=dict
    )  # OMP_NUM_THREADS / MKL_NUM_THREADS as the script had them

    @property
    def demand(self) -> int:
        """Threads computing at once on this machine: intra-op threads × training processes."""
        return self.intra_op * self.local_processes


def read_threads(injected: Any) -> ThreadUse | None:
    """The ``threads`` record of a parsed ``injected.json``, or ``None`` when it has none (or a malformed one)."""
    rec = injected.get("threads") if isinstance(injected, dict) else None
    if not isinstance(rec, dict):
        return None
    try:
        return ThreadUse(
            intra_op=int(rec["intra_op"]),
            local_processes=max(int(rec.get("local_processes") or 1), 1),
            inter_op=_int(rec.get("inter_op")),
            cpu_count=_int(rec.get("cpu_count")),
            affinity=_int(rec.get("affinity")),
            loader_workers=_int(rec.get("loader_workers")),
            env={str(k): str(v) for k, v in (rec.get("env") or {}).items()},
        )
    except (KeyError, TypeError, ValueError):
        return None


def _int(v: Any) -> int | None:
    return None if v is None or isinstance(v, bool) else int(v)
