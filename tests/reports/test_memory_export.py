"""A memory fix in the shareable report: the Apply's export and the report of the run it was
tried on say, in Markdown, HTML and JSON, the peaks its record carries (live tensors before → after
with the change, the run peaks) beside the step time — the sentence the terminal prints."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest

from advisors.analysis import analyse
from advisors.experiments.results.stored_view import read_view
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports.export import render
from reports.run_report.context import report_extra
from tests.app.fake_runs import MEMORY_SAID, fake_run, memory_apply


@pytest.fixture()
def tried(tmp_path: Path):
    """(the run's analysis, the stored Apply's view, the run's report extras)."""
    store = RunStore(tmp_path / "runs")
    source = fake_run(store, label="source run")
    memory_apply(store, source)
    [exp] = store.list(kind="experiment")
    view = read_view(experiments.view(store, exp.run_id))
    assert view is not None and view.record is not None
    return analyse(source.run_dir), view, report_extra(Path(source.run_dir), store)


def _text(html: str) -> str:
    """The page's visible text: tags dropped, entities read, runs of blanks one space."""
    body = re.sub(r"<script.*?</script>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", " ", body)))


def test_the_apply_export_says_the_memory_in_md_and_html(tried) -> None:
    a, view, _ = tried
    md = render(a, "md", experiment=view).decode()
    assert f"Memory: {MEMORY_SAID}." in md
    assert "| peak of live host tensors (MB) | 612 | 210 | -66% |" in md
    assert "| run peak (MB) | 900 | 700 | — |" in md
    html = render(a, "html", experiment=view).decode()
    page = _text(html)
    assert f"Memory: {MEMORY_SAID}." in page
    assert "Peak of live host tensors before → after 612 → 210 MB (-66%)" in page
    assert "Run peak before → after 900 → 700 MB" in page
    # the bar of the peaks, before beside after, among the export's charts
    [spec] = re.findall(r'data-figure="fig-exp_memory">(.*?)</script>', html, flags=re.S)
    bars = {t["name"]: t["y"] for t in json.loads(spec)["data"]}
    assert bars == {"before": [612.4, 900.0], "after": [210.2, 700.0]}


def test_the_json_export_keeps_the_records_peaks(tried) -> None:
    a, view, _ = tried
    memory = json.loads(render(a, "json", experiment=view))["experiment"]["memory"]
    assert memory == {
        "basis": "host tensors",
        "before_peak_allocated_mb": 612.4,
        "after_peak_allocated_mb": 210.2,
        "peak_allocated_change": round(210.2 / 612.4 - 1, 4),
        "before_peak_memory_mb": 900.0,
        "after_peak_memory_mb": 700.0,
    }


def test_the_runs_report_lists_the_memory_with_its_experiment(tried) -> None:
    a, _, extra = tried
    [row] = extra["experiments"]
    assert row["memory"] == MEMORY_SAID
    md = render(a, "md", extra=extra).decode()
    assert f"Memory: {MEMORY_SAID}." in md.split("## Experiments on this run")[1]
    page = _text(render(a, "html", extra=extra).decode())
    assert f"Memory: {MEMORY_SAID}." in page.split("Experiments on this run")[1]


def test_a_ladder_round_says_its_memory_in_md_and_html(tried) -> None:
    a, view, _ = tried
    from dataclasses import replace

    from advisors.experiments.results.record import LadderRecord

    rung = replace(view.record, kind="ladder round", round=1)
    lad = LadderRecord(
        rounds=(rung,), total_speedup=0.8, rounds_asked=1, why_stopped="", complete=True
    )
    said = f"Round 1 (Activation checkpointing) memory: {MEMORY_SAID}."
    assert f"- {said}" in render(a, "md", ladder=lad).decode()
    assert said in _text(render(a, "html", ladder=lad).decode())
