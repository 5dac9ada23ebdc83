"""How many DataLoader workers, one number per run: what the advice quotes, the snippet writes and
an Apply trial injects all come from :func:`plan_workers`, with the reason in words.

The number follows what the run showed: one worker per usable core (2 to 8) for a loader on the
training thread; twice the cores when the loader waited while the cores sat idle (storage latency,
not CPU); twice the workers now, up to 4 per core, for a loader that already has workers and room.
When the run's own processes kept the cores saturated, more workers cannot help: the loader leaves
the training thread, and a script that asks for more workers than it has usable cores gets one per
core. Each choice is then measured A/B like any fix; nothing is assumed to help.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from advisors.facts import Facts
from advisors.fixes.context import ScriptContext
from advisors.verdict import Fix
from profilers.telemetry.summary import TelemetrySummary
from profilers.telemetry.threads import ThreadUse

MIN_WORKERS, MAX_WORKERS = 2, 8
SATURATED_HOST = (
    0.85  # the run's own processes this busy (of its usable cores): no room for workers
)
IDLE_HOST = 0.6  # below this, the loader is waiting on something other than the CPU
MAX_WORKERS_PER_CORE = 4
#: the portable worker count: one per core, 2 to 8, read on the machine that trains
WORKERS_FORMULA = "min(max(os.cpu_count(), 2), 8)"
WORKERS_CODE = f"num_workers={WORKERS_FORMULA}"
PIN_CODE = (
    "pin_memory=torch.cuda.is_available()"  # pinned pages only where there is a GPU to copy to
)
LOADER_CODE = "loader = DataLoader(ds, batch_size=B, shuffle=True,\n"
DOCS = "https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading"


@dataclass(frozen=True)
class WorkerCount:
    """As many DataLoader workers as this machine has cores (2 to 8), never fewer than now."""

    def __str__(self) -> str:
        return "cores"


def worker_count(cores: int | None, current: int = 0) -> int:
    """One worker per core, between 2 and 8, never fewer than ``current`` (what :class:`WorkerCount`
    resolves to on a machine of ``cores`` cores)."""
    return max(current, min(max(cores or MIN_WORKERS, MIN_WORKERS), MAX_WORKERS))


@dataclass(frozen=True)
class WorkerPlan:
    """The run's DataLoader figures and the one worker count for it: ``cores`` the run could use
    (``None``: not recorded), ``current`` its own ``num_workers`` (``None``: not known), ``busy``
    the share of those cores its processes kept busy, ``count`` the workers to use (``None``: more
    workers cannot help), ``why`` the reason in words."""

    cores: int | None
    current: int | None
    busy: float | None
    count: int | None
    why: str

    @property
    def suggested(self) -> int:
        """The count to write: :attr:`count`, else the run's own (more cannot help)."""
        return self.count if self.count is not None else self.current or 0

    @property
    def over_cores(self) -> str | None:
        """ "the script asks for 4 workers on 2 usable cores" when its count exceeds its cores."""
        if self.cores is None or self.current is None or self.current <= self.cores:
            return None
        return f"the script asks for {self.current} workers on {self.cores} usable cores"

    def phrase(self) -> str:
        """``num_workers=N`` with where N comes from, e.g. "num_workers=2 (2 cores; now 0)"."""
        where = [self.why]
        if self.current is not None:
            where.append(f"now {self.current}")
        code = f"num_workers={self.suggested}" if self.cores else WORKERS_CODE
        return f"{code} ({'; '.join(where)})"


def plan_workers(cores: int | None, current: int | None, busy: float | None) -> WorkerPlan:
    """The one worker count for a run of ``cores`` usable cores, ``current`` workers, ``busy`` share
    of its cores busy with its own processes."""
    now = current or 0
    if not cores:
        return WorkerPlan(None, current, busy, worker_count(None, now), "one per core, 2 to 8")

    def plan(count: int | None, why: str) -> WorkerPlan:
        return WorkerPlan(cores, current, busy, count, why)

    per_core = worker_count(cores)
    if busy is not None and busy >= SATURATED_HOST:
        if now == 0:  # loading on the training thread competes with the step itself: move it off
            return plan(per_core, f"{cores} cores, {busy:.0%} busy: off the training thread")
        if now > cores:
            return plan(
                cores,
                f"fewer: the script asks for {now} workers on {cores} usable cores, "
                f"{busy:.0%} busy",
            )
        return plan(None, f"{cores} cores {busy:.0%} busy: more workers would take the step's CPU")
    if now == 0:
        if busy is not None and busy < IDLE_HOST:
            n = min(cores * 2, MAX_WORKERS * 2)
            return plan(
                n,
                f"trying {n}: {n / cores:g} per core, the loader waited while the {cores} cores "
                f"sat idle, {busy:.0%} busy",
            )
        return plan(per_core, f"{cores} cores")
    top = cores * MAX_WORKERS_PER_CORE
    if now >= top:
        return plan(
            None, f"{now} workers on {cores} cores: {MAX_WORKERS_PER_CORE} per core already"
        )
    return plan(min(now * 2, top), f"twice the {now} now, on {cores} cores")


def cores_of(tel: TelemetrySummary | None, threads: ThreadUse | None) -> int | None:
    """The cores a run could use: its CPU affinity as its agent recorded it, else its telemetry's
    usable cores (affinity, else the machine's)."""
    if threads is not None and threads.affinity:
        return threads.affinity
    return tel.usable_cores if tel is not None else None


def loader_numbers(f: Facts) -> WorkerPlan:
    """The run's worker plan read from its facts: the same inputs a trial of the run reads
    (:func:`advisors.experiments.script_strategy.context_of`)."""
    tel = f.telemetry
    current = (
        f.spec.num_workers
        if f.spec is not None and f.spec.num_workers is not None
        else (0 if f.loader_mode == "single_process" else None)
    )
    busy = tel.run_cpu_busy if tel is not None else None
    return plan_workers(cores_of(tel, f.threads), current, busy)


def next_worker_count(ctx: ScriptContext) -> int | None:
    """The worker count a trial measures, or ``None`` when more workers cannot help."""
    return plan_workers(ctx.cores, ctx.workers, ctx.host_busy).count


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


def with_workers(fix: Fix, plan: WorkerPlan) -> Fix:
    """``fix`` with its snippet's worker count written for the run of ``plan``, a comment above
    saying why and giving the portable formula; unchanged where the run's cores are unknown or the
    snippet sets no worker count."""
    if not plan.cores or WORKERS_CODE not in fix.snippet:
        return fix
    n = plan.suggested
    why = f"# num_workers={n}: {plan.why} (on another machine: {WORKERS_FORMULA})\n"
    return replace(fix, snippet=why + fix.snippet.replace(WORKERS_CODE, f"num_workers={n}"))
