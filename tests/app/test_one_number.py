"""One step time per run (issue 12.1): the run's time per step after warm-up, equal on the Runs
list, the Analysis page, ``analyze --json`` and the report; the profiled window's own median is
labelled as such.

The fake run's ``result.json`` says 51 ms while its trace's profiled steps last 50 ms: the two numbers a page
could show, so a page that reads the wrong one fails here."""

from __future__ import annotations

import json
from pathlib import Path

from cli.advisors import analyze
from advisors.analysis import analyse
from reports.export import render
from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_run


def test_analysis_page_shows_the_runs_own_time_per_step(store) -> None:
    record = fake_run(store, label="one number")
    at = open_page("analysis")
    assert_clean(at)
    metric = next(m for m in at.metric if m.label == "Time per step")
    assert metric.value == "51.0 ms"
    assert "profiled window's own median step: 50.0 ms" in metric.help
    runs = open_page()
    assert runs.dataframe[0].value.set_index("id").loc[record.run_id, "ms/step"] == 51.0


def test_analyze_json_and_report_say_the_same(store) -> None:
    record = fake_run(store, label="one number")
    doc = analyze(record.run_dir)
    assert doc["step_time_ms"] == 51.0 and doc["run"]["step_time_ms"] == 51.0
    assert doc["profiled_step_time_ms"] == 50.0
    assert (
        doc["evidence"]["step_time_ms"] == 51.0 and doc["evidence"]["profiled_step_time_ms"] == 50.0
    )
    a = analyse(Path(record.run_dir))
    assert a.step_time_ms == 51.0 and a.profiled_step_time_ms == 50.0
    md = render(a, "md").decode()
    assert "| 51.00 ms |" in md and "profiled window's own median step: 50.00 ms" in md
    doc = json.loads(render(a, "json"))
    assert (
        doc["step_time_ms"] == doc["summary"]["step_time_ms"] == 51.0
        and doc["profiled_step_time_ms"] == 50.0
    )


def test_an_uploaded_trace_is_its_profiled_median(store, tmp_path: Path) -> None:
    record = fake_run(store, label="trace only")
    trace = next((Path(record.run_dir) / "tb").iterdir())
    doc = analyze(str(trace))
    assert doc["step_time_ms"] == doc["profiled_step_time_ms"] == 50.0
