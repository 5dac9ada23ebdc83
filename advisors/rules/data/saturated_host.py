"""DATA005 — the input pipeline holds the step while the run's own processes keep its cores busy.

Also :func:`contention_note`: when other programs took the cores instead, that is said in words (a note of
the diagnosis), never read as the run saturating its host."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.fit import OTHERS_MIN_CORES
from advisors.fixes import already_done, loader_numbers
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.synthetic import observation, run_facts
from profilers.run.run_config import RunConfig
from profilers.telemetry.summary import TelemetrySummary

_CACHED = RunConfig(workload="data_bound", cache_decoded=True)
_FOUR_WORKERS = RunConfig(workload="data_bound", num_workers=4)


CONTENDED_BUSY = 0.85  # the machine this busy while the run's own share is below it: contention


def _host(
    busy_pct: float, cores: int = 2, samples: int = 200, run_cores: float | None = None
) -> TelemetrySummary:
    ours = busy_pct / 100 * cores * 0.95 if run_cores is None else run_cores
    return TelemetrySummary(
        source="host",
        samples=samples,
        rate_hz=10.0,
        cpu_count=cores,
        process_cpu_pct=100 * ours,
        system_cpu_pct=busy_pct,
    )


def contention_note(tel: TelemetrySummary | None) -> str | None:
    """Words for a run whose machine was busy with other programs rather than with the run: how many of the
    cores they took, what the run's processes got. ``None`` when there was no such contention."""
    if (
        tel is None
        or tel.host_cpu_busy is None
        or tel.run_cpu_busy is None
        or tel.other_cores is None
    ):
        return None
    if (
        tel.host_cpu_busy < CONTENDED_BUSY
        or tel.run_cpu_busy >= CONTENDED_BUSY
        or tel.other_cores < OTHERS_MIN_CORES
    ):
        return None
    usable, cores = tel.usable_cores, tel.cpu_count or 1
    return (
        f"Contention: other programs used {tel.other_cores:.2f} of the machine's {cores} cores during the steady "
        f"steps ({tel.other_cores / cores:.0%} of it; the host was {tel.host_cpu_busy:.0%} busy), and this "
        f"run's processes got {tel.run_cores:.2f} of the {usable} cores they could use "
        f"({tel.run_cpu_busy:.0%}). The host's saturation is theirs, not the run's: it is no reason against "
        "more DataLoader workers, and the step times are slower than the run alone would be (re-run on a "
        "quieter machine to measure it)."
    )


class LoaderOnSaturatedHost(Rule):
    """Exposed loading while the run's own processes keep (nearly) all the cores they could use busy during the
    steady steps, read from the run's host telemetry (psutil, ≥ 10 Hz): the training process tree's CPU over
    its usable cores (its CPU affinity, else the machine's core count). A host made busy by *other* programs is
    contention, not the run's demand: this rule does not fire on it (more workers may still help once the
    machine is quiet), and the diagnosis says so in a note (:func:`contention_note`).

    DataLoader workers only help when there are idle cores for them: with every core already decoding or
    computing, a worker takes its CPU from the training step (measured on the 2-core ``data_bound`` bench:
    2 workers gave 1.00× [0.85, 1.22] while caching decoded samples gave 6.3×). So this rule proposes making
    each sample cheaper — decode once and cache — instead of spreading the same work over more processes.
    It needs run telemetry (an uploaded trace cannot show host saturation); GPU runs sample the host beside
    NVML, so it judges them too.

    Thresholds: ``loader_share`` (0.10) — exposed loader time worth fixing; ``busy`` (0.85) of the run's
    usable cores busy with its own processes, ``high_busy`` (0.97) for full confidence; ``min_samples`` (5) telemetry samples inside steady
    steps before the median means anything.

    When the script's own ``num_workers`` exceeds those usable cores, the message and the evidence
    (``workers_over_cores``) say so: "the script asks for 4 workers on 2 usable cores".

    Fix: cache decoded samples (alternatives: worker processes, when the cores free up; never more of them
    than the cores here: :func:`advisors.fixes.plan_workers`).
    """

    id, name, bottleneck = "DATA005", "loader-on-saturated-host", Bottleneck.DATA
    cause = "loader_wait"
    thresholds = {"loader_share": 0.10, "busy": 0.85, "high_busy": 0.97, "min_samples": 5}
    fix_id = "cache_decoded"
    fires = (
        Example(
            "40% exposed loading, host cores 96% busy",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4}, run=run_facts(telemetry=_host(96.0))
            ),
            fix="cache_decoded",
            severity=0.4,
        ),
        Example(
            "40% exposed loading, host cores 96% busy, the script asks for 4 workers on 2 cores",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4},
                run=run_facts(telemetry=_host(96.0), spec=_FOUR_WORKERS),
            ),
            fix="cache_decoded",
            severity=0.4,
        ),
    )
    passes = (
        Example(
            "40% exposed loading, host cores 55% busy (room for workers)",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4}, run=run_facts(telemetry=_host(55.0))
            ),
        ),
        Example(
            "host cores 98% busy but loading only 3% of the step",
            lambda: observation(
                {"gpu_compute": 0.9, "dataloader": 0.03}, run=run_facts(telemetry=_host(98.0))
            ),
        ),
        Example(
            "40% exposed loading, host 96% busy, decoded samples cached already",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4},
                run=run_facts(telemetry=_host(96.0), spec=_CACHED),
            ),
        ),
        Example(
            "40% exposed loading, host 93% busy, but other programs took 1.74 of 2 cores (the run got 0.13)",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4},
                run=run_facts(telemetry=_host(93.5, run_cores=0.13)),
            ),
        ),
        Example(
            "40% exposed loading, host 97% busy in only 3 samples",
            lambda: observation(
                {"gpu_compute": 0.5, "dataloader": 0.4},
                run=run_facts(telemetry=_host(97.0, samples=3)),
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.telemetry is None:
            return "no run telemetry (an uploaded trace has none): host saturation unknown"
        if f.telemetry.run_cpu_busy is None:
            return (
                f"the run's {f.telemetry.source or 'unknown'} telemetry does not say how busy its own processes "
                "kept the cores it could use"
            )
        if f.telemetry.samples < self.t["min_samples"]:
            return (
                f"only {f.telemetry.samples} telemetry samples fell inside steady steps "
                f"(≥ {self.t['min_samples']:.0f} needed): run more steps to judge host saturation"
            )
        return None

    def check(self, f: Facts) -> Finding | None:
        tel = f.telemetry
        busy = tel.run_cpu_busy if tel is not None else None
        if (
            tel is None
            or busy is None
            or busy < self.t["busy"]
            or f.loader_exposed < self.t["loader_share"]
        ):
            return None
        if already_done(self.fix_id, f):  # caching is on: the loader's CPU cost is what is left
            return None
        cores = f"{tel.usable_cores} cores" if tel.usable_cores else "cores"
        over = loader_numbers(f).over_cores
        fewer = f" And {over}: one per core would stop them taking the step's CPU." if over else ""
        return self.finding(
            f,
            severity=f.loader_exposed,
            confidence=ramp(busy, self.t["busy"], self.t["high_busy"]),
            message=f"Loading holds {pct(f.loader_exposed)} of the step while the run's own processes keep its "
            f"{cores} {pct(busy)} busy: more DataLoader workers would take their CPU from the step itself. "
            "Make each sample cheaper instead: decode once and cache the decoded samples." + fewer,
            evidence={
                "dataloader_exposed_share": f.loader_exposed,
                "run_cpu_busy": busy,
                "host_cpu_busy": tel.host_cpu_busy,
                "other_cores": tel.other_cores,
                "cpu_count": tel.cpu_count,
                "process_cpu_pct": tel.process_cpu_pct,
                "telemetry_samples": tel.samples,
                "num_workers": f.spec.num_workers if f.spec else None,
                **({"workers_over_cores": over} if over else {}),
            },
        )
