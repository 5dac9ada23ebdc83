"""One fact, one value, on every surface: a real launched run with an Apply and a two-round ladder
started from the dashboard, and an imported multi-rank job. Every number and word that appears on more than one
surface — the Advisor card, the Runs list, an experiment's trial table, the ladder table, the Analysis and Job
pages, the Markdown and HTML report and ``--json`` — is read from each and must be equal.

The walk that filed the issue found, on one Apply: "inconclusive" on the card and "rejected" in the list; 179.4 →
175.2 samples/s on the card and 190.6 → 367.7 in the trial table; three upper bounds for one fix. Slow: real runs of
the tiny ``data_bound`` workload (an Apply of 2 + 2 runs and a ladder of one round), a few minutes on 2 cores."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Iterator

import pytest
import streamlit as st

from advisors.analysis import analyse
from advisors.experiments.results.record import ExperimentRecord, TrialRecord
from advisors.experiments.results.stored_view import StoredView, read_view
from app import state as app_state
from app.widgets import ui
from cli.advisors import main as advisors_main
from cli.profilers import main as profilers_main
from profilers.run.records import RunRecord
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports.export import render
from tests.app.conftest import assert_clean, open_page, plain
from tests.job_factory import planted_job

TRIALS = 2  # runs per arm: the dashboard's least, to keep the test short


def _json(capsys: pytest.CaptureFixture[str], main: Any, *argv: str) -> dict[str, Any]:
    code = main(list(argv))
    out = capsys.readouterr().out
    assert code in (0, 3), out
    return json.loads(out)


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The dashboard walk, once for the module: launch ``data_bound`` tiny, Apply its advised fix, then a one-round
    ladder (its other candidates), both from the Advisor page."""
    home = tmp_path_factory.mktemp("cross") / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STEPWISE_HOME", str(home))
        st.cache_data.clear()
        assert profilers_main(["run", "data_bound", "--size", "tiny", "--store", str(home)]) == 0
        store = RunStore(home)
        [source] = store.list()
        at = open_page("advisor")
        assert_clean(at)
        at.number_input(key="advisor.trials").set_value(TRIALS)
        # one pair more at most: beside another test the pairs are competed for, and a contended
        # verdict reads as the same word on every surface all the same
        at.number_input(key="advisor.max_trials").set_value(TRIALS + 1)
        at.button(key="advisor.apply").click().run()
        job = at.session_state[app_state.EXPERIMENT_JOB]
        assert job.wait(900) and job.error is None, job.error
        at.number_input(key="advisor.rounds").set_value(1).run()
        at.button(key="advisor.optimise").click().run()
        ladder_job = at.session_state[app_state.LADDER_JOB]
        assert ladder_job.wait(1800) and ladder_job.error is None, ladder_job.error
        at.run()
        assert_clean(at)
        exps = {r.label.split(" ")[0].lower(): r for r in store.list(kind="experiment")}
        yield {
            "home": home,
            "store": store,
            "source": source,
            "advisor": at,
            "apply": exps["apply"],
            "ladder": exps["optimise"] if "optimise" in exps else exps["ladder"],
        }


def _view(store: RunStore, exp: RunRecord) -> StoredView:
    view = read_view(experiments.view(store, exp.run_id))
    assert view is not None, exp.run_id
    return view


def _metric(at: Any, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _html(text: str) -> str:
    """``text`` as the report's jinja2 template escapes it (markupsafe's entities)."""
    for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("'", "&#39;"), ('"', "&#34;")):
        text = text.replace(a, b)
    return text


def _rate(value: float | None) -> str:
    return f"{value:,.1f}" if value else "—"


@pytest.mark.slow
def test_the_apply_reads_the_same_on_card_list_trials_report_and_json(
    walked: dict[str, Any],
) -> None:
    store, at = walked["store"], walked["advisor"]
    view = _view(store, walked["apply"])
    x = view.record
    assert x is not None and x.kind == "apply"
    # the card
    boxes = [
        b.value
        for b in (*at.success, *at.warning, *at.info, *at.error)
        if b.value.startswith("**Outcome: ")
    ]
    assert plain(boxes[0]) == f"**Outcome: {x.outcome_text}**"
    if x.outcome not in ("not applied", "failed"):
        assert _metric(at, f"Before: {x.rate_unit}") == _rate(x.before_samples_per_s)
        assert _metric(at, f"After: {x.rate_unit}") == _rate(x.after_samples_per_s)
        assert _metric(at, "Speed-up") == f"{x.speedup:.2f}×"
        assert x.speedup and x.after_samples_per_s and x.before_samples_per_s
        assert x.speedup == pytest.approx(x.after_samples_per_s / x.before_samples_per_s, rel=1e-3)
    # the Runs list: its outcome word and speed-up
    runs = open_page()
    frame = runs.dataframe[0].value.set_index("id")
    assert frame.loc[walked["apply"].run_id, "status"] == x.label
    # its trial table: each trial's samples/s the record's, and each arm's median the card's before/after
    _trial_table_agrees(store, walked["apply"], (x,), x.trials)
    # the report, from every door: the Report page, the stored export, analyze --report
    _report_says(walked, x)


def _trial_table_agrees(
    store: RunStore,
    exp: RunRecord,
    rounds: tuple[ExperimentRecord, ...],
    trials: tuple[TrialRecord, ...],
) -> None:
    runs = open_page()
    runs.selectbox(key="runs.pick").set_value(exp.run_id).run()
    assert_clean(runs)
    table = next(d.value for d in runs.dataframe if "part" in d.value.columns)
    by_id = {t.run_id: t for t in trials}
    for row in table.to_dict("records"):
        t = by_id[
            row["id"]
        ]  # every run of the experiment is one of its records (a ladder's diagnosis run too)
        assert (row["part"], row["samples/s"], row["ms/step"]) == (
            t.role,
            t.samples_per_s,
            t.step_time_ms,
        )
        assert row.get("round") == t.round or (
            t.round is None and row.get("round") != row.get("round")
        )
        assert row["in verdict"] == t.in_verdict or (
            t.role == "diagnosis" and row["in verdict"] is None
        )
    for x in rounds:
        if x.outcome in ("not applied", "failed") or x.inconclusive:
            continue
        # a pair other programs competed for is left out of the medians: its trials say so, and so does the reason
        if not all(t.in_verdict for t in x.trials):
            assert "pairs left out" in x.reason, x.reason
        arm = {
            role: [
                t.samples_per_s
                for t in x.trials
                if t.role == role and t.samples_per_s and t.in_verdict
            ]
            for role in ("baseline", "patched")
        }
        assert statistics.median(arm["baseline"]) == pytest.approx(x.before_samples_per_s, rel=1e-6)
        assert statistics.median(arm["patched"]) == pytest.approx(x.after_samples_per_s, rel=1e-6)
    # a trial opened in Analysis: the step time its row shows, and analyze --json the same samples/s
    first = trials[0]
    assert first.run_id is not None
    page = open_page("analysis")
    page.query_params["run"] = first.run_id
    page.run()
    assert_clean(page)
    assert _metric(page, "Time per step") == ui.step_time(first.step_time_ms)
    a = analyse(Path(store.get(first.run_id).run_dir))
    assert a.samples_per_s == pytest.approx(first.samples_per_s, rel=1e-6)
    assert a.step_time_ms == pytest.approx(first.step_time_ms, rel=1e-6)


def _report_says(walked: dict[str, Any], x: ExperimentRecord) -> None:
    gain = (
        f"{x.speedup:.2f}× [{x.low:.2f}, {x.high:.2f}]" if x.speedup and x.low is not None else None
    )
    report = open_page("report")
    assert_clean(report)
    md = plain(next(m.value for m in report.markdown if "## Experiments on this run" in m.value))
    row = next(line for line in md.splitlines() if line.startswith("| Apply "))
    assert f"| **{x.outcome_text}** |" in row and (gain is None or gain in row)
    stored = experiments.report(walked["store"], walked["apply"].run_id, "md")
    assert stored is not None and f"Outcome: {x.outcome_text}" in plain(stored.decode())
    html = experiments.report(walked["store"], walked["apply"].run_id, "html")
    assert html is not None and f"Outcome: {_html(x.outcome_text)}" in html.decode()
    if x.bound is not None:
        said = plain(stored.decode())
        assert (
            f"Upper bound on this fix's gain: {x.bound.text}." in said
        )  # with the diagnosis it comes from
        assert (
            f"its fix gains at most {x.bound.speedup:.2f}×" in said
        )  # the diagnosis' own line: the same number
    doc = json.loads(render(analyse(Path(walked["source"].run_dir)), "json"))
    assert doc["step_time_ms"] == analyse(Path(walked["source"].run_dir)).step_time_ms


@pytest.mark.slow
def test_one_bound_per_fix_and_diagnosis(walked: dict[str, Any]) -> None:
    """The diagnosis' "its fix gains at most" and the Apply card's upper bound are one number from one diagnosis
    (the source run's); each ladder round's bound names its own round's baseline run."""
    store, at = walked["store"], walked["advisor"]
    x = _view(store, walked["apply"]).record
    assert x is not None
    a = analyse(Path(walked["source"].run_dir))
    assert a.diagnosis is not None
    finding = next(f for f in a.diagnosis.findings if f.fix_id == x.fix_id)
    bound = a.bound_of(finding)
    if x.bound is None:
        assert bound is None or bound.speedup is None
        return
    assert bound is not None and bound.speedup == pytest.approx(x.bound.speedup)
    assert x.bound.baseline_run == walked["source"].run_id
    said = " ".join(p.text for p in at.progress) + " ".join(c.value for c in at.caption)
    assert f"its fix gains at most {x.bound.speedup:.2f}×" in said
    assert _metric(at, "Upper bound") == f"{x.bound.speedup:.2f}×"
    lad = _view(store, walked["ladder"]).ladder
    assert lad is not None
    for r in lad.rounds:
        if r.bound is not None:
            assert r.bound.baseline_run and r.bound.baseline_run != walked["source"].run_id
            assert f"round {r.round}" in r.bound.baseline


@pytest.mark.slow
def test_the_ladder_reads_the_same_in_its_table_list_trials_report_and_json(
    walked: dict[str, Any],
) -> None:
    store, at = walked["store"], walked["advisor"]
    view = _view(store, walked["ladder"])
    lad = view.ladder
    assert lad is not None and lad.rounds
    # the Advisor's ladder table: one row per attempt, the record's numbers
    table = next(t.value for t in at.table if "cumulative" in t.value.columns)
    assert len(table) == len(lad.rounds)
    for (_, row), x in zip(table.iterrows(), lad.rounds):
        assert row["outcome"] == x.outcome_text and row["fix"] == x.fix_title
        if x.outcome not in ("not applied", "failed"):
            assert row["speed-up"] == f"{x.speedup:.2f}×"
            assert row["before samples/s"].startswith(f"{x.before_samples_per_s:.1f}")
    total = next(m.value for m in at.markdown if m.value.startswith("Total measured speed-up"))
    assert f"**{lad.total_speedup:.2f}×**" in total
    # the Runs list names its outcome, and its trial table carries each round's trials (round, fix)
    frame = open_page().dataframe[0].value.set_index("id")
    assert frame.loc[walked["ladder"].run_id, "status"] == view.label
    _trial_table_agrees(store, walked["ladder"], lad.rounds, lad.trials)
    assert (
        lad.diagnosis is not None and lad.diagnosis.role == "diagnosis" and lad.diagnosis.round == 1
    )
    # the report's row for it: the same total
    md = plain(
        next(
            m.value for m in open_page("report").markdown if "## Experiments on this run" in m.value
        )
    )
    row = next(
        line
        for line in md.splitlines()
        if line.startswith("| Optimise") or line.startswith("| Ladder")
    )
    assert (
        f"| **{view.label} — round 1: " in row and f"{lad.total_speedup:.2f}×" in row
    )  # each round said


def test_an_imported_job_reads_the_same_on_job_analysis_report_and_json(
    store: RunStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Step time, bottleneck, ranks and straggler of a multi-rank job: the Job page, the Analysis page of the
    imported folder, ``analyze --json``, ``compare --json`` and the report."""
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    folder = planted_job(tmp_path / "job")
    doc = _json(capsys, advisors_main, "analyze", str(folder), "--json")
    job_page = open_page("job")
    job_page.text_input(key="job.folder").set_value(str(folder)).run()
    assert_clean(job_page)
    assert _metric(job_page, "Median step") == ui.step_time(doc["step_time_ms"])
    assert _metric(job_page, "Bottleneck") == doc["bottleneck"]
    assert (
        int(_metric(job_page, "Ranks")) == doc["job"]["ranks"]
        if isinstance(doc["job"].get("ranks"), int)
        else len(doc["job"]["ranks"])
    )
    record = store.import_trace(folder)
    page = open_page("analysis")
    page.query_params["run"] = record.run_id
    page.run()
    assert_clean(page)
    assert _metric(page, "Median step") == ui.step_time(doc["step_time_ms"])
    a = analyse(Path(record.run_dir))
    assert a.diagnosis is not None
    assert (
        a.step_time_ms == doc["step_time_ms"] and a.diagnosis.bottleneck.value == doc["bottleneck"]
    )
    md = render(a, "md").decode()
    assert f"**Binding bottleneck: {doc['bottleneck']}** (confidence {doc['confidence']:.0%})" in md
    assert doc["straggler_reason"] in plain(md)
    ranks = _json(capsys, advisors_main, "compare", str(folder), str(folder), "--json")["ranks"][
        "base"
    ]
    assert ranks["straggler_reason"] == doc["straggler_reason"]
    assert re.search(rf"\b{doc['step_time_ms']:.2f} ms\b", md)


@pytest.mark.slow
def test_compare_on_an_applys_own_trial_pair_reads_as_its_card(
    walked: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The walk read "rejected: slower 0.26×" on the Apply card and "Speed-up of B 3.96× ↑" on
    Compare for the same pair (throughput on one, the median step on the other). Compare and
    ``compare --json`` on the Apply's first back-to-back pair in its verdict: its direction is the
    card's, its speed-up that pair's own ratio on the card."""
    store = walked["store"]
    x = _view(store, walked["apply"]).record
    assert x is not None
    if x.outcome in ("not applied", "failed") or not x.pair_ratios:
        pytest.skip(f"the Apply judged no pair ({x.outcome})")
    # pair_ratios[0]'s pair
    first = min(t.pair for t in x.trials if t.in_verdict and t.role == "patched")
    pair = {t.role: t for t in x.trials if t.pair == first}
    base, new = pair["baseline"], pair["patched"]
    assert base.run_id and new.run_id
    sides = [str(store.path(base.run_id)), str(store.path(new.run_id))]
    code = advisors_main(["compare", *sides, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == {"regression": 1, "inconclusive": 3}.get(doc["verdict"], 0)  # a slower B exits 1
    compared = 1 / doc["ratio"]  # NEW's time per step over BASE's, inverted: B's speed-up
    own = base.step_time_ms / new.step_time_ms if base.step_time_ms and new.step_time_ms else None
    assert own is not None and compared == pytest.approx(own, rel=0.01)  # the trial rows' ms/step
    assert compared == pytest.approx(x.pair_ratios[0], rel=0.01)  # the card's ratio of that pair
    assert (compared > 1) == (
        x.pair_ratios[0] > 1
    )  # the card's direction for that pair (pairs may disagree)
    for side, t in (("base", base), ("new", new)):
        assert doc[side]["step_time_ms"] == pytest.approx(t.step_time_ms, rel=1e-3)
    page = open_page()
    page.query_params["a"], page.query_params["b"] = base.run_id, new.run_id
    page.switch_page("views/compare.py").run()
    assert_clean(page)
    assert _metric(page, "Speed-up of B") == f"{compared:.2f}×"
    assert _metric(page, "A time per step") == ui.step_time(doc["base"]["step_time_ms"])
    assert _metric(page, "B time per step") == ui.step_time(doc["new"]["step_time_ms"])
