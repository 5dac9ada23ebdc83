"""How many DataLoader workers: for advice, one per core of the machine (2 to 8, never fewer than now); for a
trial, the next count to measure from what the last run showed.

When the loader waits while cores sit idle (storage latency, not CPU), more workers than cores are tried; when
the cores are saturated, more workers cannot help and caching or fewer workers are tried instead. Each choice
is then measured A/B like any fix; nothing is assumed to help.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from advisors.facts import Facts
from advisors.fixes.context import ScriptContext

MIN_WORKERS, MAX_WORKERS = 2, 8
SATURATED_HOST = 0.85  # host cores this busy (share of all cores) leave no room for more workers
IDLE_HOST = 0.6  # below this, the loader is waiting on something other than the CPU
MAX_WORKERS_PER_CORE = 4
#: the snippet's worker count: what :func:`worker_count` resolves to, never a fixed number
WORKERS_CODE = "num_workers=min(max(os.cpu_count(), 2), 8)"
PIN_CODE = (
    "pin_memory=torch.cuda.is_available()"  # pinned pages only where there is a GPU to copy to
)
LOADER_CODE = "loader = DataLoader(ds, batch_size=B, shuffle=True,\n"
DOCS = "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"


@dataclass(frozen=True)
class WorkerCount:
    """As many DataLoader workers as this machine has cores (between 2 and 8), never fewer than now."""

    def __str__(self) -> str:
        return "cores"


def worker_count(cores: int | None, current: int = 0) -> int:
    """DataLoader workers for a machine of ``cores`` cores: as many as cores, between 2 and 8, never fewer than
    ``current`` (what :class:`WorkerCount` resolves to on this machine, and what advice quotes for a run's own)."""
    return max(current, min(max(cores or MIN_WORKERS, MIN_WORKERS), MAX_WORKERS))


def next_worker_count(ctx: ScriptContext) -> int | None:
    """The next worker count to measure, or ``None`` when more workers cannot help (cores saturated)."""
    busy, cores, now = ctx.host_busy, ctx.cores, ctx.workers
    if busy is not None and busy >= SATURATED_HOST:
        if now == 0:
            return cores  # loading on the main thread competes with the step itself: move it off
        return (
            cores if now > cores else None
        )  # fewer workers than now, or nothing to gain from workers
    if now == 0:
        return cores * 2 if busy is not None and busy < IDLE_HOST else cores
    return (
        min(now * 2, cores * MAX_WORKERS_PER_CORE) if now < cores * MAX_WORKERS_PER_CORE else None
    )


def worker_knobs(ctx: ScriptContext, extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """The knobs of a workers trial: the next count, kept alive and prefetching, pinned on CUDA."""
    n = next_worker_count(ctx)
    if n is None or n == ctx.workers:
        return None
    knobs: dict[str, Any] = {
        "num_workers": n,
        "persistent_workers": True,
        "prefetch_factor": 4,
        **extra,
    }
    if ctx.device == "cuda":
        knobs["pin_memory"] = True
    return knobs


@dataclass(frozen=True)
class LoaderNumbers:
    """The run's own DataLoader figures: host cores (telemetry), workers now (spec), workers to use."""

    cores: int | None
    current: int | None
    suggested: int

    def phrase(self) -> str:
        """``num_workers=N`` with where N comes from, e.g. "num_workers=2 (2 cores; now 0)"."""
        where = [f"{self.cores} cores" if self.cores else "one per core, 2 to 8"]
        if self.current is not None:
            where.append(f"now {self.current}")
        return (
            f"num_workers={self.suggested} ({'; '.join(where)})"
            if self.cores
            else f"num_workers=min(max(os.cpu_count(), 2), 8) ({'; '.join(where)})"
        )


def loader_numbers(f: Facts) -> LoaderNumbers:
    cores = f.telemetry.cpu_count if f.telemetry is not None else None
    current = (
        f.spec.num_workers
        if f.spec is not None and f.spec.num_workers is not None
        else (0 if f.loader_mode == "single_process" else None)
    )
    return LoaderNumbers(cores, current, worker_count(cores, current or 0))
