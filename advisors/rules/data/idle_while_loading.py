"""DATA002 — the device sits idle while the loader runs."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fixes import first_fitting
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig

_LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
_PREFETCHING = RunConfig(
    workload="data_bound",
    num_workers=2,
    persistent_workers=True,
    prefetch_factor=4,
    pin_memory=True,
)


class DeviceIdleWhileLoading(Rule):
    """How much of the DataLoader's own time the GPU spends idle: loading that is not overlapped with compute.

    Workers that prefetch far enough ahead make ``next(iter)`` nearly free; when the device idles for most of
    the loader's time, batches are produced just in time (too few workers, no prefetch, workers restarted each
    epoch) and the whole exposed loader share is at stake.

    Thresholds: ``min_idle_fraction`` (0.5) — fraction of loader time with the GPU idle; ``moderate_share``
    (0.05) — exposed loader time worth fixing; ``high_share`` (0.20) — full confidence.

    Fix: keep workers alive and prefetch deeper (``persistent_workers``, ``prefetch_factor``), pin memory;
    when a stored run does that already, cache decoded samples; when it caches too, no fix.
    """

    id, name, bottleneck = "DATA002", "device-idle-while-loading", Bottleneck.DATA
    cause = "loader_wait"
    thresholds = {"min_idle_fraction": 0.5, "moderate_share": 0.05, "high_share": 0.20}
    fix_id = "prefetch_pinned"
    fires = (
        Example(
            "GPU idle for all 30% of loader time",
            lambda: observation({"gpu_compute": 0.6, "dataloader": 0.30}, ops={_LOADER: 0.31}),
            fix="prefetch_pinned",
            severity=0.3,
        ),
        Example(
            "stored run already persistent, prefetching 4 and pinned: cache decoded samples",
            lambda: observation(
                {"gpu_compute": 0.6, "dataloader": 0.30},
                ops={_LOADER: 0.31},
                run=run_facts(spec=_PREFETCHING),
            ),
            fix="cache_decoded",
            severity=0.3,
        ),
    )
    passes = (
        Example(
            "loader runs 30% of the step but the GPU computes meanwhile (3% exposed)",
            lambda: observation({"gpu_compute": 0.9, "dataloader": 0.03}, ops={_LOADER: 0.30}),
        ),
        Example(
            "CPU-only trace",
            lambda: observation({"dataloader": 0.3}, device="cpu", ops={_LOADER: 0.3}),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.device != "gpu":
            return "no GPU timeline: device idleness during loading cannot be measured"
        if f.loader_total <= 0:
            return "no DataLoader ops in the trace: loading cannot be separated from the step"
        return None

    def check(self, f: Facts) -> Finding | None:
        if f.loader_exposed < self.t["moderate_share"]:
            return None
        idle_fraction = min(f.loader_exposed / f.loader_total, 1.0)
        if idle_fraction < self.t["min_idle_fraction"]:
            return None
        fix = first_fitting(f, "prefetch_pinned", "cache_decoded")
        what = {
            "prefetch_pinned": "prefetch deeper with persistent workers and pinned memory",
            "cache_decoded": "prefetching is on already: keep decoded samples in memory",
            None: "prefetching, pinned memory and caching are on already: make each sample cheaper to produce",
        }
        return self.finding(
            f,
            severity=f.loader_exposed,
            confidence=ramp(f.loader_exposed, self.t["moderate_share"], self.t["high_share"]),
            message=f"The GPU idles for {pct(idle_fraction)} of the DataLoader's time ({pct(f.loader_exposed)} of "
            f"the step): {what[fix]}.",
            evidence={
                "idle_fraction_of_loader_time": idle_fraction,
                "dataloader_exposed_share": f.loader_exposed,
                "dataloader_total_share": f.loader_total,
                "gpu_busy_share": f.gpu_busy,
            },
            fix_id=fix,
        )
