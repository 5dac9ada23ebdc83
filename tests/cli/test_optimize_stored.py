"""``advisors optimize`` stores its ladder as one experiment (issue 12.2): its trial runs are inside it, tagged,
and hidden from the run list; the JSON names it (``experiment_id``). Timings are faked; the runs are stored."""

from __future__ import annotations

import argparse
from pathlib import Path

from advisors.diagnosis import diagnose
from advisors.experiments.experiment import Policy
from advisors.experiments.optimize import optimize
from advisors.experiments.trials import RunOutcome
from advisors.observation import observe
from advisors.stats import Trial
from cli.optimize import _stored
from profilers.run.records import RunResult, RunStatus
from tests.advisors.fake_script import BASE, knob
from tests.advisors.experiments.test_experiment import FakeStrategy
from profilers.store import experiments
from profilers.store.runs import RunStore
from advisors.experiments.results.stored_view import read_view
from tests.app.fake_runs import fake_run


def test_a_cli_ladder_is_one_stored_experiment(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    seen = fake_run(store, label="what the diagnosis reads")  # a data-bound trace

    def work(exp_id: str):
        def run(spec, on_progress=None) -> RunOutcome:
            trial = store.create("launch", "ab-data_bound", parent=exp_id, role="trial")
            fast = bool(knob(spec, "num_workers"))
            store.finish(
                trial.run_id,
                RunResult(RunStatus.OK, steps_done=8, step_time_ms=50.0 if fast else 100.0),
            )
            walls = tuple((50.0 if fast else 100.0) + i % 3 for i in range(8))
            return RunOutcome(
                "ok", Trial(walls, 16.0), 300.0, (2.0, 1.6, 1.3), 8, run_dir=trial.run_dir
            )

        return optimize(
            BASE,
            run,
            rounds=1,
            policy=Policy(trials=2, n_boot=50),
            strategy=FakeStrategy(),
            diagnose_run=lambda o: diagnose(observe(Path(seen.run_dir))),
        )

    out = _stored(
        store, "Ladder of 1 rounds on data_bound", argparse.Namespace(rounds=1, trials=2), work
    )
    exp = store.get(out["experiment_id"])
    assert exp.kind == "experiment" and exp.status is RunStatus.OK and exp.source_run is None
    assert [r.run_id for r in store.list(trials=False)] == [exp.run_id, seen.run_id]
    roles = sorted(t.role or "" for t in experiments.trials(store, exp.run_id))
    assert roles == [
        "baseline",
        "baseline",
        "diagnosis",
        "patched",
        "patched",
    ]  # + round 1's diagnosis run
    seen_view = read_view(experiments.view(store, exp.run_id))
    assert seen_view is not None and seen_view.ladder is not None
    assert (
        seen_view.ladder.total_speedup == out["total_speedup"]
    )  # the JSON and the stored view: one record
    assert [x.outcome_text for x in seen_view.ladder.rounds] == [
        r["outcome"] for r in out["rounds"]
    ]
