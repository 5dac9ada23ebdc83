"""DATA001 — the step waits for the input pipeline."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import workers_on
from advisors.fixes import first_fitting, loader_numbers
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig

_MULTI = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


class LoaderStarvesStep(Rule):
    """Exposed DataLoader time: the share of step time spent fetching the next batch while nothing else runs.

    On a GPU this is DataLoader time the device sits idle for; on a CPU it is the loader's share of the step
    (the training process itself decodes and collates). Hidden loading (worker processes prefetching while the
    step computes) does not count: only exposed time can be won back, so it is the severity.

    Thresholds: ``moderate_share`` (0.05) — exposed loader time worth fixing; ``high_share`` (0.20) — the
    loader clearly binds (full confidence from here).

    Fix, never one the run already uses (:mod:`advisors.fit`): worker processes with prefetching and pinned
    memory, quoting the run's own cores and workers; when workers are already on — a stored run's spec, or the
    trace's multi-process iterator — keep decoded samples in memory (a stored run) or keep the workers alive and
    prefetch deeper (a trace, whose dataset code is unknown); when the run does all of it, no fix.
    """

    id, name, bottleneck = "DATA001", "loader-starves-step", Bottleneck.DATA
    cause = "loader_wait"
    thresholds = {"moderate_share": 0.05, "high_share": 0.20}
    fix_id = "dataloader_workers"
    fires = (
        Example(
            "GPU waits 34% of the step for a single-process loader",
            lambda: observation(
                {"gpu_compute": 0.55, "dataloader": 0.34},
                ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.36},
            ),
            fix="dataloader_workers",
            severity=0.34,
        ),
        Example(
            "CPU run: loader 25% of the step",
            lambda: observation({"dataloader": 0.25, "forward": 0.4}, device="cpu"),
            fix="dataloader_workers",
            severity=0.25,
        ),
        Example(
            "trace with a multi-process loader, 30% exposed: never 'use workers' again",
            lambda: observation({"gpu_compute": 0.6, "dataloader": 0.3}, ops={_MULTI: 0.31}),
            fix="prefetch_pinned",
            severity=0.3,
        ),
        Example(
            "stored run with 2 workers, 30% exposed: cache decoded samples",
            lambda: observation(
                {"gpu_compute": 0.6, "dataloader": 0.3},
                run=run_facts(spec=RunConfig(workload="data_bound", num_workers=2)),
            ),
            fix="cache_decoded",
            severity=0.3,
        ),
    )
    passes = (
        Example(
            "loader hidden by workers: 1% exposed",
            lambda: observation({"gpu_compute": 0.8, "dataloader": 0.01}),
        ),
        Example("no loader in the trace", lambda: observation({"gpu_compute": 0.9})),
    )

    def check(self, f: Facts) -> Finding | None:
        if f.loader_exposed < self.t["moderate_share"]:
            return None
        level = "high" if f.loader_exposed >= self.t["high_share"] else "moderate"
        fix, what = _lever(f)
        n = loader_numbers(f)
        return self.finding(
            f,
            severity=f.loader_exposed,
            confidence=ramp(f.loader_exposed, self.t["moderate_share"], self.t["high_share"]),
            message=f"The step waits {pct(f.loader_exposed)} of its time for the next batch ({level}): {what}.",
            evidence={
                "dataloader_exposed_share": f.loader_exposed,
                "dataloader_total_share": f.loader_total,
                "gpu_busy_share": f.gpu_busy,
                "level": level,
                "profiled_step_time_ms": f.step_ms,
                "loader_mode": f.loader_mode,
                "num_workers": n.current,
                "cpu_count": n.cores,
                **({"workers_over_cores": n.over_cores} if n.over_cores else {}),
            },
            fix_id=fix,
        )


def _lever(f: Facts) -> tuple[str | None, str]:
    """The first DataLoader lever the run does not already pull, and how to say it."""
    if not workers_on(f):
        return (
            "dataloader_workers",
            f"load batches in worker processes, {loader_numbers(f).phrase()}, with "
            "prefetching and pinned memory",
        )
    order = (
        ("cache_decoded", "prefetch_pinned")
        if f.spec is not None
        else ("prefetch_pinned", "cache_decoded")
    )
    fix = first_fitting(f, *order)
    if fix == "cache_decoded":
        return fix, "workers are on already: keep decoded samples in memory"
    if fix == "prefetch_pinned":
        return (
            fix,
            "workers are on already: keep them alive across epochs, prefetch deeper and pin memory",
        )
    return (
        None,
        "workers, prefetching, pinned memory and caching are all on already: make each sample cheaper "
        "to produce (pre-process once, store it ready to load)",
    )
