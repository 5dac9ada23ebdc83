"""HOST004 — more intra-op threads than free cores: the CPU step's operators wait for their own threads."""

from __future__ import annotations

from advisors.facts import Facts
from advisors.observation import RunFacts
from advisors.verdict import Bottleneck, Finding
from advisors.rules.base import Example, Rule, pct, ramp
from advisors.fit import free_cores, threads_for, usable_cores, workers_that_fit
from advisors.synthetic import observation, run_facts
from profilers.telemetry.threads import ThreadUse
from profilers.telemetry.summary import TelemetrySummary


def _run(
    threads: int,
    others: float,
    cores: int = 2,
    processes: int = 1,
    samples: int = 40,
    workers: int | None = None,
) -> RunFacts:
    ours = min(threads * processes, cores - others)
    tel = TelemetrySummary(
        source="host",
        samples=samples,
        rate_hz=10.0,
        cpu_count=cores,
        process_cpu_pct=100 * ours,
        system_cpu_pct=100 * (ours + others) / cores,
    )
    return run_facts(
        telemetry=tel,
        threads=ThreadUse(
            intra_op=threads,
            local_processes=processes,
            cpu_count=cores,
            affinity=cores,
            loader_workers=workers,
        ),
    )


_STEP = {"forward": 0.3, "backward": 0.55, "optimizer": 0.05}


class OversubscribedThreads(Rule):
    """The training processes' intra-op threads outnumber the cores other programs left free: torch sizes its
    pool to the machine's cores, and a busy machine (or several ranks, or an explicit ``set_num_threads``) leaves
    fewer. Each operator splits its work over every thread and waits at its end for the last one; a thread the
    scheduler took off its core holds the whole operator for a time slice. On a busy 2-core machine minGPT ran
    720–814 ms a step with torch's default two threads and 123 ms with one.

    Evidence from the run's own agent (``injected.json``'s ``threads``: intra-op threads, training processes on the
    machine, CPU affinity) and host telemetry (other programs' cores over the steady steps,
    ``TelemetrySummary.other_cores``; under ``OTHERS_MIN_CORES`` (0.25) that is background). Demand: intra-op
    threads × training processes; free cores: the usable cores (affinity, else the machine's) less the other
    programs' cores. DataLoader workers are named, not counted: torch runs them on one thread each, and they wait
    while the queue is full; but more worker processes than usable cores on an oversubscribed
    machine compete with the operators' threads whenever they load, so the message then names them
    and how many fit beside the training threads (:func:`advisors.fit.workers_that_fit`: the free
    cores those threads leave, at least one).

    Severity: the operators' time (``Facts.device_work``: forward, backward and the optimizer on a CPU) — all of it
    waits on the threads, and it can shrink many times over, more than a share of the cores
    suggests. The fix's own bound counts only what a fair share of the cores loses
    (:mod:`advisors.fixes.host.set_num_threads`). How much
    depends on how waiting threads wait: spinning (libgomp's default) pays it in full (minGPT-sized, one hog:
    one thread 2–5.8× faster); ``OMP_WAIT_POLICY=PASSIVE`` in the user's own environment hides most of it
    (``benchmarks/results/threads-2026-11-27-busy.md``). Stepwise never sets it for the user's run: the
    message says which the run had, and a run without it gets it tried as a fix of its own after the
    thread count (:mod:`advisors.fixes.host.passive_waits`, the patched arm only).

    Thresholds: ``min_excess_cores`` (0.5) — demand at least this many threads over the free cores;
    ``min_operator_share`` (0.3) of the step in operators for their threads to matter; ``high_ratio`` (2.0) threads
    per free core for full confidence; ``min_samples`` (5) telemetry samples in steady steps.

    Fix: that many threads per process — ``torch.set_num_threads(n)``, and ``OMP_NUM_THREADS=n`` for the script and
    the processes it starts — with ``n`` the free cores ÷ the training processes, at least one.
    """

    id, name, bottleneck = "HOST004", "oversubscribed-threads", Bottleneck.HOST
    cause = "device_time"
    thresholds = {
        "min_excess_cores": 0.5,
        "min_operator_share": 0.3,
        "high_ratio": 2.0,
        "min_samples": 5,
    }
    fix_id = "set_num_threads"
    fires = (
        Example(
            "busy 2-core machine: 2 threads while other programs take 1 core (minGPT)",
            lambda: observation(_STEP, device="cpu", run=_run(threads=2, others=1.0)),
            fix="set_num_threads",
            severity=0.9,
        ),
        Example(
            "two ranks × 2 threads on a quiet 2-core machine",
            lambda: observation(_STEP, device="cpu", run=_run(threads=2, others=0.0, processes=2)),
            fix="set_num_threads",
            severity=0.9,
        ),
        Example(
            "busy 2-core machine, 2 threads and 4 DataLoader workers (makemore's --num-workers 4)",
            lambda: observation(_STEP, device="cpu", run=_run(threads=2, others=1.0, workers=4)),
            fix="set_num_threads",
            severity=0.9,
        ),
    )
    passes = (
        Example(
            "2 threads on a quiet 2-core machine",
            lambda: observation(_STEP, device="cpu", run=_run(threads=2, others=0.1)),
        ),
        Example(
            "1 thread beside a program taking 1 of 2 cores",
            lambda: observation(_STEP, device="cpu", run=_run(threads=1, others=1.0)),
        ),
        Example(
            "2 threads beside other programs, but the step is 80% loading",
            lambda: observation(
                {"forward": 0.1, "backward": 0.1, "dataloader": 0.8},
                device="cpu",
                run=_run(threads=2, others=1.0),
            ),
        ),
    )

    def missing(self, f: Facts) -> str | None:
        if not f.has_steps:
            return "no profiled steps to measure"
        if f.device != "cpu":
            return "intra-op threads are judged on a CPU run, whose operators run on them"
        if f.threads is None:
            return "torch's thread count was not recorded (a script launched by Stepwise's agent records it)"
        tel = f.telemetry
        if tel is None or tel.other_cores is None:
            return "no host telemetry of other programs' load: the free cores are unknown"
        if tel.samples < self.t["min_samples"]:
            return f"only {tel.samples} telemetry samples fell inside steady steps: other programs' load is unknown"
        return None

    def check(self, f: Facts) -> Finding | None:
        t, tel = f.threads, f.telemetry
        usable = usable_cores(t, tel) if t is not None else None
        if t is None or tel is None or not usable or f.device_work < self.t["min_operator_share"]:
            return None
        free, others = free_cores(usable, tel.other_cores), tel.other_cores or 0.0
        n = threads_for(usable, tel.other_cores, t.local_processes)
        if t.demand < free + self.t["min_excess_cores"] or n >= t.intra_op:
            return None
        procs = (
            f"{t.local_processes} training processes"
            if t.local_processes > 1
            else "1 training process"
        )
        passive = str(t.env.get("OMP_WAIT_POLICY", "")).upper() == "PASSIVE"
        waited = (
            (
                " (this run's threads waited passively, OMP_WAIT_POLICY=PASSIVE in your environment, "
                "which hides much of the cost here; spinning threads, libgomp's default, pay it in full)"
            )
            if passive
            else ""
        )
        workers = t.loader_workers or 0
        fit = workers_that_fit(usable, tel.other_cores, t.local_processes)
        loaders = (
            (
                f"; the DataLoader's {workers} worker processes, more than the {usable} usable "
                f"cores, compete with those threads whenever they load: {fit} "
                f"fit{'s' if fit == 1 else ''} beside them (num_workers={fit})"
            )
            if workers > usable
            else ""
        )
        return self.finding(
            f,
            severity=f.device_work,
            confidence=ramp(t.demand / max(free, 0.5), 1.0, self.t["high_ratio"]),
            message=f"{t.intra_op} intra-op threads × {procs} = {t.demand} threads for {free:.1f} free cores "
            f"({usable} usable, other programs using {others:.2f} during the steady steps): the threads are "
            f"oversubscribed, and operators holding {pct(f.device_work)} of the step wait at every barrier "
            f"for a thread that lost its core{waited}{loaders}; "
            f"train with {n} thread{'s' if n > 1 else ''} per process: "
            f"torch.set_num_threads({n}), or OMP_NUM_THREADS={n} for the script and its workers.",
            evidence={
                "intra_op_threads": t.intra_op,
                "inter_op_threads": t.inter_op,
                "training_processes": t.local_processes,
                "usable_cores": usable,
                "other_cores": others,
                "free_cores": free,
                "suggested_threads": n,
                "loader_workers": t.loader_workers,
                "loader_workers_over_cores": workers > usable,
                "loader_workers_that_fit": fit,
                "omp_num_threads": t.env.get("OMP_NUM_THREADS"),
                "omp_wait_policy": t.env.get("OMP_WAIT_POLICY"),
                "device_work_share": f.device_work,
            },
        )
