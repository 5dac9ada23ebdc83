"""Stored experiments made with the real judge and the real ladder, their trial timings faked: what the browser
tests of outcome words read (a real A/B of a slowed fix would take minutes of training per test).

Each trial is a real stored run (tagged with its experiment) of the fake script
(:mod:`tests.advisors.fake_script`: a fix reaches it as injected knobs); its steps take 50 ms when it has loader
workers and 100 ms otherwise — so a workers fix is kept, and any fix that changes nothing else measures no gain,
or (``slow_fix``) doubles the step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from advisors.experiments.experiment import Policy, run_experiment
from advisors.experiments.optimize import optimize
from advisors.experiments.trials import RunOutcome
from advisors.stats import Trial
from app.services import experimenting, stored_jobs
from profilers.run.records import RunRecord, RunResult, RunStatus
from profilers.store.runs import RunStore
from advisors.analysis import Analysis, analyse
from tests.advisors.experiments.test_experiment import FakeStrategy
from tests.advisors.fake_script import BASE, apply, knob

JOB_WAIT_S = 300


def fake_runner(store: RunStore, experiment: str, source_spec: Any, slow_fix: bool) -> Any:
    def run(spec: Any, on_progress: Any = None) -> RunOutcome:
        trial = store.create(
            "launch",
            "ab-data_bound",
            files={"script.json": spec.to_dict()},
            parent=experiment,
            role="trial",
        )
        if slow_fix:
            base = 200.0 if spec != source_spec else 100.0
        else:
            base = 50.0 if knob(spec, "num_workers", 0) > 0 else 100.0
        walls = tuple(base + i % 3 for i in range(8))
        store.finish(trial.run_id, RunResult(RunStatus.OK, steps_done=10, step_time_ms=base))
        return RunOutcome(
            status="ok",
            trial=Trial(walls_ms=walls, samples_per_step=16.0),
            peak_memory_mb=300.0,
            losses=(2.3, 1.9, 1.6, 1.4),
            steps_done=10,
            run_dir=trial.run_dir,
        )

    return run


def analysis_of(record: RunRecord) -> Analysis:
    return analyse(Path(record.run_dir), record.label)


def rejected_apply(store: RunStore, source: RunRecord) -> str:
    """An Apply whose patched runs take twice as long: stored, judged by the real judge. Returns its id."""
    a = analysis_of(source)
    assert a.run is not None and a.run.spec is not None
    spec = BASE  # the source run's script, as the fake script stands for it
    fix = experimenting.candidate_fixes(a)[0]
    job = stored_jobs.start(
        store,
        source,
        "apply",
        {"fix": fix.id, "fix_title": fix.title, "trials": 2},
        a,
        lambda exp_id, report: run_experiment(
            spec,
            fix,
            fake_runner(store, exp_id, spec, True),
            Policy(trials=2),
            on_progress=report,
            apply=apply,
        ),
    )
    assert job.wait(JOB_WAIT_S) and job.error is None, job.error
    assert job.experiment_id is not None
    return job.experiment_id


def early_stopping_ladder(store: RunStore, source: RunRecord, rounds: int = 3) -> str:
    """A ladder of ``rounds`` rounds whose every diagnosis is the source's: round 1 keeps the workers fix, round 2
    finds nothing more to keep, so it stops early. Returns its id."""
    a = analysis_of(source)
    assert a.run is not None and a.run.spec is not None and a.diagnosis is not None
    spec, diagnosis = BASE, a.diagnosis
    job = stored_jobs.start(
        store,
        source,
        "ladder",
        {"rounds": rounds, "trials": 2},
        a,
        lambda exp_id, report: optimize(
            spec,
            fake_runner(store, exp_id, spec, False),
            rounds=rounds,
            policy=Policy(trials=2),
            device="cpu",
            on_progress=report,
            diagnose_run=lambda _: diagnosis,
            strategy=FakeStrategy(),
        ),
    )
    assert job.wait(JOB_WAIT_S) and job.error is None, job.error
    assert job.experiment_id is not None
    return job.experiment_id
