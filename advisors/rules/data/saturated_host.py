"""DATA005 — the input pipeline holds the step while the host's cores are already busy."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import already_done
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.spec import TrainingSpec
from profilers.telemetry.summary import TelemetrySummary

_CACHED = TrainingSpec(workload="data_bound", cache_decoded=True)


def _host(busy_pct: float, cores: int = 2, samples: int = 200) -> TelemetrySummary:
    return TelemetrySummary(source="host", samples=samples, rate_hz=10.0, cpu_count=cores,
                            process_cpu_pct=busy_pct * cores * 0.95, system_cpu_pct=busy_pct)


class LoaderOnSaturatedHost(Rule):
    """Exposed loading on a host whose cores are (nearly) all busy during the steady steps, read from the run's
    host telemetry (psutil, ≥ 10 Hz): ``system_cpu_pct``, or the training process tree's CPU over the core
    count.

    DataLoader workers only help when there are idle cores for them: with every core already decoding or
    computing, a worker takes its CPU from the training step (measured on the 2-core ``data_bound`` bench:
    2 workers gave 1.00× [0.85, 1.22] while caching decoded samples gave 6.3×). So this rule proposes making
    each sample cheaper — decode once and cache — instead of spreading the same work over more processes.
    It needs run telemetry (an uploaded trace cannot show host saturation); GPU runs sample the host beside
    NVML, so it judges them too.

    Thresholds: ``loader_share`` (0.10) — exposed loader time worth fixing; ``busy`` (0.85) of the host's
    cores busy, ``high_busy`` (0.97) for full confidence; ``min_samples`` (5) telemetry samples inside steady
    steps before the median means anything.

    Fix: cache decoded samples (alternatives: worker processes, when the cores free up).
    """

    id, name, bottleneck = "DATA005", "loader-on-saturated-host", Bottleneck.DATA
    cause = "loader_wait"
    thresholds = {"loader_share": 0.10, "busy": 0.85, "high_busy": 0.97, "min_samples": 5}
    fix_id = "cache_decoded"
    fires = (
        Example("40% exposed loading, host cores 96% busy",
                lambda: observation({"gpu_compute": 0.5, "dataloader": 0.4}, run=run_facts(telemetry=_host(96.0))),
                fix="cache_decoded", severity=0.4),
    )
    passes = (
        Example("40% exposed loading, host cores 55% busy (room for workers)",
                lambda: observation({"gpu_compute": 0.5, "dataloader": 0.4}, run=run_facts(telemetry=_host(55.0)))),
        Example("host cores 98% busy but loading only 3% of the step",
                lambda: observation({"gpu_compute": 0.9, "dataloader": 0.03},
                                    run=run_facts(telemetry=_host(98.0)))),
        Example("40% exposed loading, host 96% busy, decoded samples cached already",
                lambda: observation({"gpu_compute": 0.5, "dataloader": 0.4},
                                    run=run_facts(telemetry=_host(96.0), spec=_CACHED))),
        Example("40% exposed loading, host 97% busy in only 3 samples",
                lambda: observation({"gpu_compute": 0.5, "dataloader": 0.4},
                                    run=run_facts(telemetry=_host(97.0, samples=3)))),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.telemetry is None:
            return "no run telemetry (an uploaded trace has none): host saturation unknown"
        if f.telemetry.host_cpu_busy is None:
            return f"the run's {f.telemetry.source or 'unknown'} telemetry does not say how busy the host's cores were"
        if f.telemetry.samples < self.t["min_samples"]:
            return (f"only {f.telemetry.samples} telemetry samples fell inside steady steps "
                    f"(≥ {self.t['min_samples']:.0f} needed): run more steps to judge host saturation")
        return None

    def check(self, f: Facts) -> Finding | None:
        tel = f.telemetry
        busy = tel.host_cpu_busy if tel is not None else None
        if tel is None or busy is None or busy < self.t["busy"] or f.loader_exposed < self.t["loader_share"]:
            return None
        if already_done(self.fix_id, f):  # caching is on: the loader's CPU cost is what is left
            return None
        cores = f"{tel.cpu_count} cores" if tel.cpu_count else "cores"
        return self.finding(
            f, severity=f.loader_exposed, confidence=ramp(busy, self.t["busy"], self.t["high_busy"]),
            message=f"Loading holds {pct(f.loader_exposed)} of the step while the host's {cores} are {pct(busy)} "
                    "busy: more DataLoader workers would take their CPU from the step itself. Make each sample "
                    "cheaper instead: decode once and cache the decoded samples.",
            evidence={"dataloader_exposed_share": f.loader_exposed, "host_cpu_busy": busy,
                      "cpu_count": tel.cpu_count, "process_cpu_pct": tel.process_cpu_pct,
                      "telemetry_samples": tel.samples,
                      "num_workers": f.spec.num_workers if f.spec else None})
