"""``analyze`` on an experiment's folder says what it is and points at its trial runs (issue 42: it printed
"unknown · 0 steps · median step 0.00 ms … no trace" and exited 0)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from cli.advisors import main
from profilers.store import experiments
from profilers.store.runs import RunStore
from tests.app.fake_runs import fake_run


def test_an_experiment_folder_is_named_and_its_trials_pointed_at(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    source = fake_run(store, label="source run")
    exp = experiments.start(
        store, source.run_id, "apply", "Apply DataLoader worker processes", {"fix": "x"}
    )
    trial = store.create("run", "ab-data_bound", parent=exp.run_id, role="baseline")
    experiments.finish(
        store,
        exp.run_id,
        {
            "mode": "apply",
            "fix_id": "dataloader_workers",
            "kept": True,
            "reason": "kept",
            "summary": {"speedup": 1.42},
        },
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["analyze", exp.run_dir, "--json"])
    said = err.getvalue()
    assert code == 2 and said.startswith("error: ") and "is an experiment" in said
    assert "kept 1.42×" in said and trial.run_dir in said
