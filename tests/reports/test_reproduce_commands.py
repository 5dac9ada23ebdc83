"""A run's report says how to run each arm of an experiment again: as its trials ran (issue 42: the report's
reproduce commands said ``--steps 10`` while the trials ran 15 steps)."""

from __future__ import annotations

from pathlib import Path

from advisors.experiments.results.record import ExperimentRecord, TrialRecord
from advisors.experiments.results.stored_view import apply_view
from profilers.run.records import RunResult, RunStatus
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports.run_report.context import report_extra
from tests.app.fake_runs import fake_run

TRAIN = ["python", "-m", "sample_runs.train", "data_bound"]


def _launched(store: RunStore, steps: int, extra: list[str], measure: int) -> str:
    """A finished trial run whose launch and script say it ran ``--steps steps`` timing ``measure`` steps."""
    command = [*TRAIN, "--steps", str(steps), *extra]
    r = store.create(
        "launch",
        "ab sample_runs.train",
        files={
            "launch.json": {"command": command, "cwd": "/code", "steps": 3},
            "script.json": {
                "command": command,
                "cwd": "/code",
                "warmup_steps": 3,
                "measure_steps": measure,
                "profile_steps": 3,
            },
        },
    )
    return store.finish(r.run_id, RunResult(status=RunStatus.OK)).run_id


def test_the_arms_commands_are_the_trials_own(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    source = fake_run(
        store,
        kind="launch",
        files={"launch.json": {"command": [*TRAIN, "--steps", "10"], "cwd": "/code", "steps": 3}},
    )
    base = _launched(store, 15, [], 8)
    patched = _launched(store, 15, ["--num-workers", "2"], 8)
    trials = tuple(
        TrialRecord(
            run_id=rid,
            role=role,
            pair=1,
            round=None,
            fix_id="dataloader_workers",
            status="ok",
            samples_per_s=100.0,
            step_time_ms=160.0,
            steps=8,
        )
        for rid, role in ((base, "baseline"), (patched, "patched"))
    )
    x = ExperimentRecord(
        kind="apply",
        fix_id="dataloader_workers",
        fix_title="DataLoader worker processes",
        bottleneck="data",
        outcome="kept",
        outcome_text="kept",
        reason="kept",
        speedup=1.5,
        trials_per_arm=3,
        spec_change={"num_workers": 2},
        trials=trials,
    )
    exp = experiments.start(
        store,
        source.run_id,
        "apply",
        "Apply DataLoader worker processes",
        {"fix": "dataloader_workers"},
    )
    experiments.finish(store, exp.run_id, apply_view(x, {}))
    extra = report_extra(Path(source.run_dir), store)
    assert (
        extra["reproduce"]["command"]
        == "cd /code && python -m sample_runs.train data_bound --steps 10"
    )
    [row] = extra["experiments"]
    assert row["commands"] == {
        "before": "cd /code && python -m sample_runs.train data_bound --steps 15",
        "after": "cd /code && python -m sample_runs.train data_bound --steps 15 --num-workers 2",
        "measure": "python -m advisors optimize --fix dataloader_workers --trials 3 --steps 8 --warmup 3 "
        "--cwd /code -- python -m sample_runs.train data_bound --steps 15",
    }
