"""Advisor → Apply and Optimise on a stored run, with the runs faked: a fix that halves the step time.

Each fake trial points at the stored run's folder, so the diagnosis of a trial and the before/after breakdown
read a real (hand-written) run folder; only the training is skipped.
"""

from __future__ import annotations

import json
import re

import pytest

from advisors.experiments import trials
from advisors.experiments.results.recording import applied
from advisors.stats import Trial
from advisors.experiments.trials import RunOutcome
from app import state as app_state
from tests.app.conftest import assert_clean, fix_selector, open_page
from tests.advisors.fake_script import BASE, apply, knob
from tests.app.fake_runs import fake_run


@pytest.fixture()
def stored(store, monkeypatch):
    record = fake_run(store)

    def fake_store_runner(st_store, timeout_s=None, experiment=None):
        def run(spec, on_progress=None):
            if on_progress:
                on_progress({"step": 5, "total_steps": 10})
            base = 50.0 if knob(spec, "num_workers", 0) > 0 else 100.0
            walls = tuple(base + i % 3 for i in range(8))
            return RunOutcome(
                status="ok",
                trial=Trial(walls_ms=walls, samples_per_step=16.0),
                peak_memory_mb=300.0,
                losses=(2.3, 1.9, 1.6, 1.4),
                steps_done=10,
                run_dir=record.run_dir,
            )

        return run

    monkeypatch.setattr(trials, "script_runner", fake_store_runner)
    return record


def _finish(at, key: str) -> None:
    job = at.session_state[key]
    assert job.wait(60), "the background job finished"
    at.run()
    assert_clean(at)
    assert job.error is None, job.error


@pytest.mark.slow
def test_apply_shows_before_and_after(stored) -> None:
    at = open_page("advisor")
    assert_clean(at)
    assert fix_selector(at).value == "dataloader_workers"
    at.number_input(key="advisor.trials").set_value(2)
    at.button(key="advisor.apply").click().run()
    _finish(at, app_state.EXPERIMENT_JOB)
    assert at.success and at.success[0].value == "**Outcome: kept**"
    assert [m.label for m in at.metric][:4] == [
        "Before: samples/s",
        "After: samples/s",
        "Speed-up",
        "Upper bound",
    ]
    before, after = (float(at.metric[i].value.replace(",", "")) for i in (0, 1))
    ratio = float(at.metric[2].value.rstrip("×"))
    assert ratio == pytest.approx(2.0, rel=0.1)
    # one speed-up: the card is after ÷ before of the cards beside it, as rounded on the page
    assert ratio == pytest.approx(after / before, abs=0.006)
    assert any(
        c.value.startswith("The breakdown covers only the steps the profiler traced")
        for c in at.caption
    )
    verdict = next(c.value for c in at.caption if c.value.startswith(f"Speed-up {ratio:.2f}×"))
    # the same speed as the samples/s beside it
    assert "interval" in verdict and "Time per step" in verdict
    said = re.findall(r"Time per step ([0-9.]+) ms before, ([0-9.]+) ms after", verdict)[0]
    per = [float(x) for x in said]
    # the ms/step say the speed-up the card says
    assert per[0] / per[1] == pytest.approx(ratio, rel=0.01)
    assert float(at.metric[3].value.rstrip("×")) == pytest.approx(
        2.5, rel=0.02
    )  # loader 60% of the step at stake
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [
        "Report with this fix (HTML)",
        "Report with this fix (MD)",
        "Report with this fix (JSON)",
    ]


def test_optimise_shows_the_ladder(stored) -> None:
    at = open_page("advisor")
    at.number_input(key="advisor.rounds").set_value(2)
    at.button(key="advisor.optimise").click().run()
    _finish(at, app_state.LADDER_JOB)
    assert any("Total measured speed-up" in m.value for m in at.markdown)
    ladder = at.table[-1].value
    assert (
        ladder["outcome"].iloc[0] == "kept"
        and ladder["fix"].iloc[0] == "DataLoader worker processes"
    )
    assert float(ladder["upper bound"].iloc[0].rstrip("×")) == pytest.approx(2.5, rel=0.02)
    assert any(w.value.startswith("All 2 rounds ran") for w in [*at.warning, *at.success])


def test_a_ladder_round_whose_baseline_moved_is_said_on_the_page(store, monkeypatch) -> None:
    """Issue 42: round 2's "before" was twice round 1's "after" for the same code; the page says so, from the
    record. Here the machine halves its speed after round 1 (a diagnosis run and 3 pairs)."""
    record = fake_run(store)
    calls = iter(range(1000))

    def fake_store_runner(st_store, timeout_s=None, experiment=None):
        def run(spec, on_progress=None):
            slow = 2.0 if next(calls) >= 7 else 1.0
            base = slow * (50.0 if knob(spec, "num_workers", 0) > 0 else 100.0)
            walls = tuple(base + i % 3 for i in range(8))
            return RunOutcome(
                status="ok",
                trial=Trial(walls_ms=walls, samples_per_step=16.0),
                peak_memory_mb=300.0,
                losses=(2.3, 1.9, 1.6, 1.4),
                steps_done=10,
                run_dir=record.run_dir,
            )

        return run

    monkeypatch.setattr(trials, "script_runner", fake_store_runner)
    at = open_page("advisor")
    at.number_input(key="advisor.rounds").set_value(2)
    at.button(key="advisor.optimise").click().run()
    _finish(at, app_state.LADDER_JOB)
    ladder = at.table[-1].value
    assert ladder["outcome"].iloc[0] == "kept" and len(ladder) > 1
    moved = [
        w.value for w in at.warning if w.value.startswith("Baseline moved: round 2's baseline ran")
    ]
    assert (
        len(moved) == 1 and "round 1's patched runs (DataLoader worker processes, kept)" in moved[0]
    )


def test_report_with_the_applied_fix(stored) -> None:
    from advisors.experiments.experiment import Policy, run_experiment
    from advisors.fixes import FIXES
    from advisors.analysis import analyse
    from reports.export import render

    a = analyse(stored.run_dir)
    e = run_experiment(
        BASE, FIXES["dataloader_workers"], trials.script_runner(None), Policy(trials=2), apply=apply
    )
    view = applied(e, a.diagnosis, f"the diagnosis of {a.label}", stored.run_id)
    html = render(a, "html", experiment=view).decode()
    assert "Applied fix: DataLoader worker processes" in html and 'id="fig-exp_steps"' in html
    assert (
        f"Upper bound (2.50× (the diagnosis of {a.label}" in html and "gains at most 2.50×" in html
    )
    md = render(a, "md", experiment=view).decode()
    assert (
        "Applied fix" in md
        and f"Upper bound on this fix's gain: 2.50× (the diagnosis of {a.label}" in md
    )
    doc = json.loads(render(a, "json", experiment=view).decode())
    assert doc["experiment"]["bound"]["speedup"] == pytest.approx(2.5, rel=0.02)
    assert doc["experiment"]["bound"]["baseline_run"] == stored.run_id
    assert doc["experiment"]["speedup"] <= doc["experiment"]["bound"]["speedup"]


def test_before_after_metrics_are_the_box_plots_median(store, monkeypatch) -> None:
    """The dashboard walk: "After: median measured step 575.2 ms" above a box plot whose line read
    "median 423.4 ms" (a median of per-run medians beside the median of every step). The typical
    step the caption names beside the time per step (the two are apart here: slow steps) is the
    box's line."""
    record = fake_run(store)
    runs = iter(range(100))

    def fake_store_runner(st_store, timeout_s=None, experiment=None):
        def run(
            spec, on_progress=None
        ):  # each arm (runs A B B A) gets one steady run and one with 3 slow steps
            b = 50.0 if knob(spec, "num_workers", 0) > 0 else 100.0
            walls = (
                (b,) * 5 if next(runs) % 2 == 0 else (b, b, 3 * b, 3 * b, 3 * b)
            )  # medians b and 3b: 2b apart
            return RunOutcome(
                status="ok",
                trial=Trial(walls_ms=walls, samples_per_step=16.0),
                peak_memory_mb=300.0,
                losses=(2.3, 1.9, 1.6),
                steps_done=10,
                run_dir=record.run_dir,
            )

        return run

    monkeypatch.setattr(trials, "script_runner", fake_store_runner)
    at = open_page("advisor")
    at.number_input(key="advisor.trials").set_value(2)
    at.button(key="advisor.apply").click().run()
    _finish(at, app_state.EXPERIMENT_JOB)
    [fig] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "every timed step" in c.proto.spec
    ]
    medians = [float(t["name"].split("median ")[1].removesuffix(" ms")) for t in fig["data"]]
    caption = next(c.value for c in at.caption if "typical step (median)" in c.value)
    typical = r"typical step \(median\) ([0-9.]+) ms before, ([0-9.]+) ms after"
    shown = [float(x) for x in re.findall(typical, caption)[0]]
    assert medians == [
        100.0,
        50.0,
    ]  # 7 of each arm's 10 steps are steady (the median of run medians: 200, 100)
    assert shown == pytest.approx(medians, abs=0.051)
    assert "the box plot's line" in caption
    [bd] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Breakdown before vs after" in c.proto.spec
    ]
    title = bd["layout"]["title"][
        "text"
    ]  # drawn in half the page: on two short lines, with room above the plot
    assert "profiled window" in title and all(len(line) <= 60 for line in title.split("<br>"))
    assert bd["layout"]["margin"]["t"] >= 50 + 20 * title.count("<br>")


def test_the_evidence_is_a_static_table_nothing_cut_off(stored) -> None:
    """The dashboard walk: the Evidence was a scrolling grid whose "Efficiency" value (the MFU sentence) was
    cut off at the cell's right edge. It is a static table: every row shown, long values wrapped."""
    at = open_page("advisor")
    assert_clean(at)
    evidence = at.table[0].value
    assert list(evidence.columns) == ["measure", "value"] and "Step time" in set(
        evidence["measure"]
    )
    assert not any("measure" in getattr(d.value, "columns", ()) for d in at.dataframe)


def test_contention_is_said_beside_the_verdict_not_as_none_under_not_judged(
    store, tmp_path
) -> None:
    """The dashboard walk (a machine shared with a CI run): "Contention: other programs used 1.57 of the
    machine's 2 cores …" — why the Apply measured the fix slower — was hidden as "none: …" inside "Not enough
    data to judge". It is a warning beside the verdict, and "About this measurement" in the report."""
    from advisors.analysis import analyse
    from reports.export import render
    from tests.advisors.test_telemetry_facts import _run_with_host

    run_dir = _run_with_host(tmp_path, 93.5, run_cores=0.13)
    at = open_page("advisor")
    assert_clean(at)
    assert any(w.value.startswith("Contention: other programs used 1.74") for w in at.warning)
    assert not any("**none**" in m.value for m in at.markdown)
    md = render(analyse(run_dir), "md").decode()
    assert (
        "## About this measurement\n\n- Contention: other programs used 1.74" in md
        and "- none:" not in md
    )


def test_a_rejected_fix_reads_rejected_in_the_report_and_its_step_longer(store) -> None:
    """The dashboard walk: the report of a fix that made the step 3.6 times longer said "**Not kept**" (the
    page: "rejected") and "0.28× shorter". It says the page's outcome word and the two median steps."""
    from advisors.experiments.experiment import Policy, run_experiment
    from advisors.fixes import FIXES
    from advisors.analysis import analyse
    from reports.export import render

    record = fake_run(store)

    def run(spec, on_progress=None):
        base = (
            200.0 if knob(spec, "num_workers", 0) > 0 else 56.0
        )  # the "fix" makes every step 3.55 times longer
        return RunOutcome(
            status="ok",
            trial=Trial(walls_ms=tuple(base + i % 2 for i in range(6)), samples_per_step=16.0),
            peak_memory_mb=300.0,
            losses=(2.3, 1.9, 1.6),
            steps_done=10,
            run_dir=record.run_dir,
        )

    a = analyse(record.run_dir)
    e = run_experiment(
        BASE, FIXES["dataloader_workers"], run, Policy(trials=2, n_boot=200), apply=apply
    )
    view = applied(e, a.diagnosis, f"the diagnosis of {a.label}", record.run_id)
    md = render(a, "md", experiment=view).decode()
    assert "**Outcome: rejected: slower, 0.28×" in md and "Not kept" not in md
    # the median steps beside the speed-up, never a second ratio of them ("0.28× shorter" was one)
    assert "| 56.5 | 200.5 | — |" in md and "shorter" not in md and "longer" not in md
    html = render(a, "html", experiment=view).decode()
    assert "Outcome: rejected: slower, 0.28×" in html and "not kept" not in html
