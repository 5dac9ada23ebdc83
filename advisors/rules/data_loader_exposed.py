"""DATA001 — the step waits for the input pipeline."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.model import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation
from profilers.spec import TrainingSpec


class LoaderStarvesStep(Rule):
    """Exposed DataLoader time: the share of step time spent fetching the next batch while nothing else runs.

    On a GPU this is DataLoader time the device sits idle for; on a CPU it is the loader's share of the step
    (the training process itself decodes and collates). Hidden loading (worker processes prefetching while the
    step computes) does not count: only exposed time can be won back, so it is the severity.

    Thresholds: ``moderate_share`` (0.05) — exposed loader time worth fixing; ``high_share`` (0.20) — the
    loader clearly binds (full confidence from here).

    Fix: worker processes with prefetching and pinned memory; when workers are already on (a stored run's
    spec says so), keep decoded samples in memory instead.
    """

    id, name, bottleneck = "DATA001", "loader-starves-step", Bottleneck.DATA
    thresholds = {"moderate_share": 0.05, "high_share": 0.20}
    fix_id = "dataloader_workers"
    fires = (
        Example("GPU waits 34% of the step for a single-process loader",
                lambda: observation({"gpu_compute": 0.55, "dataloader": 0.34},
                                    ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.36}),
                fix="dataloader_workers", severity=0.34),
        Example("CPU run: loader 25% of the step", lambda: observation({"dataloader": 0.25, "forward": 0.4},
                                                                       device="cpu"),
                fix="dataloader_workers", severity=0.25),
    )
    passes = (
        Example("loader hidden by workers: 1% exposed", lambda: observation({"gpu_compute": 0.8, "dataloader": 0.01})),
        Example("no loader in the trace", lambda: observation({"gpu_compute": 0.9})),
    )

    def check(self, f: Facts) -> Finding | None:
        if f.loader_exposed < self.t["moderate_share"]:
            return None
        level = "high" if f.loader_exposed >= self.t["high_share"] else "moderate"
        fix = "cache_decoded" if _workers_already_on(f.spec) else self.fix_id
        what = "keep decoded samples in memory" if fix == "cache_decoded" else \
            "load batches in worker processes with prefetching and pinned memory"
        return self.finding(
            f, severity=f.loader_exposed, confidence=ramp(f.loader_exposed, self.t["moderate_share"],
                                                          self.t["high_share"]),
            message=f"The step waits {pct(f.loader_exposed)} of its time for the next batch ({level}): {what}.",
            evidence={"dataloader_exposed_share": f.loader_exposed, "dataloader_total_share": f.loader_total,
                      "gpu_busy_share": f.gpu_busy, "level": level, "step_time_ms": f.step_ms},
            fix_id=fix)


def _workers_already_on(spec: TrainingSpec | None) -> bool:
    return spec is not None and spec.num_workers > 0 and not spec.cache_decoded
