"""A run's report is the same from every door (issue 41 item 2): ``stepwise analyze RUN --report`` writes what the
dashboard's Report page shows for the same run — its analysis (the one stored in the run's folder), the
experiments tried on it, how to reproduce it and its environment — and the Runs list shows that analysis' figures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from advisors.analysis.stored import ANALYSIS_FILE
from app import data
from cli.advisors import main
from profilers.store import experiments
from reports.export import render
from reports.run_report.context import report_extra
from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_run


def _tried(store, label: str = "doors"):
    """A stored run with a finished experiment on it (a kept DataLoader fix)."""
    source = fake_run(store, label=label)
    exp = experiments.start(
        store,
        source.run_id,
        "apply",
        "Apply DataLoader worker processes",
        {"fix": "dataloader_workers"},
    )
    experiments.finish(
        store,
        exp.run_id,
        {
            "mode": "apply",
            "fix_id": "dataloader_workers",
            "kept": True,
            "reason": "",
            "summary": {"verdict": "kept", "speedup": 1.42, "low": 1.3, "high": 1.5, "trials": 3},
        },
    )
    return source


def _cli_report(run_dir: str, out: Path) -> str:
    assert main(["analyze", run_dir, "--report", str(out)]) == 0
    return out.read_text(encoding="utf-8")


def test_the_command_line_writes_the_report_the_report_page_shows(
    store, tmp_path: Path, capsys
) -> None:
    source = _tried(store)
    at = open_page("report")
    assert_clean(at)
    page_md = next(m.value for m in at.markdown if m.value.startswith("# Stepwise report"))
    cli_md = _cli_report(source.run_dir, tmp_path / "report.md")
    assert cli_md.rstrip("\n") == page_md  # Streamlit drops a Markdown body's trailing blank lines
    assert (
        "Apply DataLoader worker processes" in cli_md and "kept" in cli_md
    )  # the run's experiment
    assert "python -m profilers run data_bound" in cli_md  # how to reproduce it
    assert "## Environment" in cli_md and "- device: cpu" in cli_md  # the environment it ran in


def test_html_and_json_are_the_same_from_both_doors_but_for_when_they_were_made(
    store, tmp_path: Path
) -> None:
    source = _tried(store, "doors html")
    record = store.get(source.run_id)
    # what the Report page's download buttons render: its cached analysis, the same extra as the command line
    page = {
        fmt: render(
            data.run_analysis(record), fmt, extra=report_extra(Path(record.run_dir), data.store())
        )
        for fmt in ("html", "json")
    }
    html = _cli_report(source.run_dir, tmp_path / "report.html")
    when = re.compile(r"generated [^<]+<")
    assert when.sub("", html) == when.sub("", page["html"].decode())
    doc, page_doc = (
        json.loads(_cli_report(source.run_dir, tmp_path / "report.json")),
        json.loads(page["json"]),
    )
    assert doc.pop("generated_unix") and page_doc.pop("generated_unix")
    assert doc == page_doc and doc["experiments"] and doc["environment"]["device"] == "cpu"


def test_the_runs_list_shows_the_stored_analysis(store) -> None:
    """The list's figures are the stored analysis' (here edited by hand, to tell them from the run's own record):
    the very value its pages and reports render, with its bottleneck."""
    record = fake_run(store, label="listed")
    run_dir = Path(record.run_dir)
    a = data.run_analysis(record)
    doc = json.loads((run_dir / ANALYSIS_FILE).read_text())
    doc["headline"]["step_time_ms"] = 77.0
    (run_dir / ANALYSIS_FILE).write_text(json.dumps(doc))
    at = open_page()
    assert_clean(at)
    row = at.dataframe[0].value.set_index("id").loc[record.run_id]
    assert row["ms/step"] == 77.0 and row["bottleneck"] == a.diagnosis.bottleneck.value
    assert row["samples/s"] == a.samples_per_s
