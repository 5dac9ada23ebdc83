"""Experiments as stored objects (issue 12.2): an Apply is one entry of the run list (its trials inside, tagged,
hidden), its result is stored and found again by a new session (a reload, a closed tab) and after a restart
(a fresh store object and an empty cache), from the run it started from."""

from __future__ import annotations

import json

import pytest
import streamlit as st

from advisors.experiments.results.stored_view import read_view
from advisors.experiments import trials
from advisors.experiments.trials import RunOutcome
from advisors.stats import Trial
from app import state as app_state
from cli.profilers import main as profilers_main
from profilers.run.records import RunResult, RunStatus
from profilers.store import experiments
from tests.app.conftest import assert_clean, open_page
from tests.advisors.fake_script import knob
from tests.app.fake_runs import fake_run


@pytest.fixture()
def source(store, monkeypatch):
    """A run to apply a fix to; each trial is a real stored run (tagged with its experiment), its timings faked."""
    record = fake_run(store, label="source run")

    def fake_store_runner(st_store, timeout_s=None, experiment=None):
        def run(spec, on_progress=None):
            trial = st_store.create(
                "launch",
                "ab-data_bound",
                files={"script.json": spec.to_dict()},
                parent=experiment,
                role="trial" if experiment else None,
            )
            if on_progress:
                on_progress({"step": 5, "total_steps": 10})
            base = 50.0 if knob(spec, "num_workers", 0) > 0 else 100.0
            walls = tuple(base + i % 3 for i in range(8))
            st_store.finish(trial.run_id, RunResult(RunStatus.OK, steps_done=10, step_time_ms=base))
            return RunOutcome(
                status="ok",
                trial=Trial(walls_ms=walls, samples_per_step=16.0),
                peak_memory_mb=300.0,
                losses=(2.3, 1.9, 1.6, 1.4),
                steps_done=10,
                run_dir=trial.run_dir,
            )

        return run

    monkeypatch.setattr(trials, "script_runner", fake_store_runner)
    return record


def _apply(at) -> None:
    at.number_input(key="advisor.trials").set_value(2)
    at.button(key="advisor.apply").click().run()
    job = at.session_state[app_state.EXPERIMENT_JOB]
    assert job.wait(60) and job.error is None, job.error
    at.run()
    assert_clean(at)


@pytest.mark.slow
def test_an_apply_is_one_entry_with_its_trials_inside(store, source) -> None:
    at = open_page("advisor")
    _apply(at)
    [exp] = store.list(kind="experiment")
    assert exp.source_run == source.run_id and exp.status is RunStatus.OK
    inside = experiments.trials(store, exp.run_id)
    assert len(inside) == 4 and {t.role for t in inside} == {"baseline", "patched"}
    listed = store.list(trials=False)
    assert {r.run_id for r in listed} == {source.run_id, exp.run_id}
    runs = open_page()
    assert set(runs.dataframe[0].value["id"]) == {source.run_id, exp.run_id}
    assert exp.label.startswith(
        "Apply DataLoader worker processes on "
    )  # the fix's title, not its id
    assert all(t.run_id not in runs.selectbox(key="runs.pick").options for t in inside)
    # the experiment's row says its outcome (the Advisor's verdict and speed-up) and the run it belongs to
    frame = runs.dataframe[0].value.set_index("id")
    x = read_view(experiments.view(store, exp.run_id)).record
    assert frame.loc[exp.run_id, "status"] == x.label == f"{x.outcome} {x.speedup:.2f}×"
    assert frame.loc[exp.run_id, "run"].endswith(" ← source run")


@pytest.mark.slow
def test_the_result_survives_a_reload_and_a_restart(store, source) -> None:
    at = open_page("advisor")
    _apply(at)
    shown = [m.label for m in at.metric]
    ratio = next(m.value for m in at.metric if m.label == "Speed-up")
    # a new session (a reload or a closed tab), then an empty cache and a fresh store (a restart)
    for restart in (False, True):
        if restart:
            st.cache_data.clear()
        again = open_page()
        again.query_params["run"] = source.run_id
        again.switch_page("views/advisor.py").run()
        assert_clean(again)
        assert [m.label for m in again.metric] == shown
        assert next(m.value for m in again.metric if m.label == "Speed-up") == ratio
        labels = [b.proto.label for b in again.get("download_button")]
        assert "Report with this fix (MD)" in labels


def test_profilers_list_shows_one_entry_per_experiment(store, source, capsys) -> None:
    at = open_page("advisor")
    _apply(at)
    assert profilers_main(["list", "--json", "--store", str(store.root)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in rows].count("experiment") == 1 and len(rows) == 2
    exp = next(r for r in rows if r["kind"] == "experiment")
    assert len(exp["trial_runs"]) == 4 and exp["source_run"] == source.run_id
    for key in (
        "run_id",
        "kind",
        "label",
        "status",
        "step_time_ms",
        "run_dir",
    ):  # the contract's fields stay
        assert key in rows[0]
    assert profilers_main(["list", "--json", "--all", "--store", str(store.root)]) == 0
    every = json.loads(capsys.readouterr().out)
    assert len(every) == 6 and {r["role"] for r in every if r["parent"]} == {"baseline", "patched"}


def test_an_experiment_whose_dashboard_died_is_settled(store) -> None:
    record = fake_run(store, label="source")
    exp = experiments.start(store, record.run_id, "apply", "Apply x on source", {"fix": "x"})
    store.update(exp.run_id, pid=2**22 + 12345, pid_started=1.0)  # a process that is gone
    assert exp.run_id in store.recover()
    assert store.get(exp.run_id).status is RunStatus.KILLED


def test_an_experiment_is_labelled_in_words() -> None:
    from app.services.stored_jobs import label_of

    assert (
        label_of("apply", {"fix": "dataloader_workers", "fix_title": "DataLoader worker processes"})
        == "Apply DataLoader worker processes"
    )
    assert label_of("apply", {"fix": "amp"}) == "Apply amp"  # an older record without the title
    assert (
        label_of("ladder", {"rounds": 1}) == "Ladder of 1 round"
        and label_of("ladder", {"rounds": 3}) == "Ladder of 3 rounds"
    )


def test_a_cancelled_apply_keeps_the_last_finished_result_in_view(store, source) -> None:
    """The dashboard walk: a second Apply, cancelled, hid the first one's result (kept or rejected) with no
    way back to it on the page. The newest says it was cancelled; the last finished one stays below it."""
    from app.services.stored_jobs import CANCELLED_BY_YOU

    at = open_page("advisor")
    _apply(at)
    assert at.success and at.success[0].value == "**Outcome: kept**"
    again = experiments.start(
        store, source.run_id, "apply", "Apply again", {"fix": "dataloader_workers"}
    )
    store.finish(
        again.run_id,
        RunResult(RunStatus.KILLED, error=f"{CANCELLED_BY_YOU} after 0 trial runs started"),
    )
    at.run()
    assert_clean(at)
    assert any(w.value.startswith("**Outcome: cancelled**") for w in at.warning)
    [earlier] = [e for e in at.expander if e.label.startswith("The last finished Apply")]
    assert [s.value for s in earlier.success] == ["**Outcome: kept**"]
    assert (
        len(at.get("plotly_chart")) >= 2
    )  # its charts, drawn under their own keys beside nothing else


def test_the_runs_report_includes_its_experiments_commands_and_environment(store, source) -> None:
    """Issue 33: one report per run, with the Apply result (outcome word, gain and interval, the change), the
    command of each arm and the environment; its Markdown pads nothing for a pull request."""
    at = open_page("advisor")
    _apply(at)
    [exp] = store.list(kind="experiment")
    x = read_view(experiments.view(store, exp.run_id)).record
    report = open_page("report")
    assert_clean(report)
    md = next(m.value for m in report.markdown if "## Experiments on this run" in m.value)
    gain = f"{x.speedup:.2f}× [{x.low:.2f}, {x.high:.2f}]"
    rates = f"{x.before_samples_per_s:.1f} → {x.after_samples_per_s:.1f} samples/s"  # the numbers it rests on
    assert f"| **{x.outcome_text}** | {rates} | {gain} | 2 |" in md
    assert "persistent_workers=True, prefetch_factor=4)" in md  # the change, as the user makes it
    assert (
        "- before: `python -m profilers run data_bound --size tiny --steps 8 --set batch_size=16`"
        in md
    )
    assert (
        "- after: `python -m profilers run data_bound --size tiny --steps 8 --set batch_size=16 --set "
        in md
    )
    assert "## Reproduce" in md and "## Environment" in md and "- device: cpu" in md
    assert "Not enough data to judge" not in md
    assert "\n## \n" not in md and not any(
        line.startswith("## ") and md.split(line, 1)[1].lstrip().startswith("## ")
        for line in md.splitlines()
    )  # no empty section


def test_the_ladder_knows_what_earlier_applies_on_the_run_measured(store) -> None:
    """Only a measured rejection stops a re-try: an inconclusive Apply does not, and a newer Apply that kept
    the fix speaks over an older rejection of it."""
    import time

    from app.services.experimenting import measured_before

    source = fake_run(store, label="source")

    def applied(fix: str, kept: bool, reason: str, speedup: float) -> str:
        exp = experiments.start(store, source.run_id, "apply", f"Apply {fix}", {"fix": fix})
        experiments.finish(
            store,
            exp.run_id,
            {
                "mode": "apply",
                "fix_id": fix,
                "kept": kept,
                "reason": reason,
                "summary": {"speedup": speedup, "not_applied": None},
            },
        )
        time.sleep(0.01)  # newest first is by creation time
        return exp.run_id

    rejected = applied(
        "dataloader_workers", False, "no real gain: 0.98x, interval [0.95, 1.01]", 0.98
    )
    applied("foreach_optimizer", False, "inconclusive: other programs took 1.0 of 2 cores", 1.0)
    applied("bf16_autocast", False, "no real gain: 1.01x", 1.01)
    applied("bf16_autocast", True, "", 1.9)
    earlier = measured_before(store, source.run_id)
    assert set(earlier) == {"dataloader_workers"}
    assert (
        rejected in earlier["dataloader_workers"]
        and "rejected: no real gain: 0.98×" in earlier["dataloader_workers"]
    )
