"""The stored report of a watched run has its timeline: the whole-run chart with each capture marked (HTML), and
a table of captures with their trigger, profiled steps and bottleneck (HTML and Markdown) — the bottleneck the
capture's stored analysis names (:func:`reports.watch_timeline.verdict`, as the terminal line says it)."""

from __future__ import annotations

import json
from pathlib import Path

from advisors.analysis import analyse
from profilers.store.runs import RunStore
from reports.export import render
from reports.run_report.context import report_extra
from reports.watch_timeline import judged_captures
from tests.app.fake_runs import fake_run


def _watched(store: RunStore) -> Path:
    record = fake_run(
        store, label="watched", kind="launch", files={"boot.json": {"watch": {"capture_steps": 3}}}
    )
    run_dir = Path(record.run_dir)
    (run_dir / "steps_rollup.jsonl").write_text(
        json.dumps(
            {
                "rank": 0,
                "first_step": 8,
                "last_step": 3007,
                "steps": 3000,
                "t_unix_ns": 1,
                "wall_ms_median": 50.0,
                "wall_ms_p10": 45.0,
                "wall_ms_p90": 70.0,
                "data_share": 0.3,
                "loss_last": 0.5,
            }
        )
        + "\n"
    )
    child = fake_run(store, label="watched · capture 1", kind="launch")
    folder = run_dir / "captures" / "r0c001"
    folder.mkdir(parents=True)
    (folder / "capture.json").write_text(
        json.dumps(
            {
                "n": 1,
                "rank": 0,
                "steps": [2010, 2012],
                "status": "done",
                "started_unix": 1.0,
                "trigger": {
                    "kind": "data_share",
                    "step": 2008,
                    "reason": "batch drawing 10% → 40% of the step",
                },
            }
        )
    )
    (folder / "stored.json").write_text(json.dumps({"run_id": child.run_id}))
    return run_dir


def test_the_report_of_a_watched_run_has_its_timeline(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    run_dir = _watched(store)
    extra = report_extra(run_dir, store)
    [capture] = extra["watch"]["captures"]
    assert (
        capture["bottleneck"] == judged_captures(run_dir)[0]["bottleneck"] and capture["bottleneck"]
    )
    assert (
        extra["watch"]["timeline"][-1]["last_step"] == 3007
        and extra["watch"]["timeline"][-1]["rolled"]
    )
    analysis = analyse(run_dir, charts=False)
    html = render(analysis, "html", extra=extra).decode()
    assert "The whole run, watched" in html and 'id="fig-watch_timeline"' in html
    assert (
        "2,010–2,012" in html
        and f"<b>{capture['bottleneck']}</b>" in html
        and "data_share at step 2008" in html
    )
    md = render(analysis, "md", extra=extra).decode()
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert (
        "data_share at step 2008" in row
        and "2,010–2,012" in row
        and f"**{capture['bottleneck']}**" in row
    )


def test_a_run_not_watched_has_no_timeline(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    record = fake_run(store, kind="launch")
    extra = report_extra(Path(record.run_dir), store)
    assert extra["watch"] is None
    assert (
        "The whole run, watched"
        not in render(analyse(Path(record.run_dir), charts=False), "md", extra=extra).decode()
    )
