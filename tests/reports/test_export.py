"""Exports: every format from real traces and stored runs; hostile names never become markup."""

from __future__ import annotations

import json
import re

import pytest

from advisors.analysis import analyse
from reports.compare import compare
from reports.export import fmt_for, render, write_report
from tests.reports.hostile import NAMES, hostile_trace

DATA = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"


@pytest.fixture(scope="module")
def data_analysis(shared_traces):
    return analyse(shared_traces / DATA)


def test_html_is_self_contained(data_analysis, tmp_path) -> None:
    out = write_report(data_analysis, tmp_path / "r.html")
    html = out.read_text()
    assert "Plotly.newPlot" in html and html.count('type="application/json"') >= 5
    page = html[
        : html.index("<script>")
    ]  # plotly.js itself mentions URLs in strings; the page must not
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no network reference"
    assert "Content-Security-Policy" in html and "'unsafe-eval'" not in html
    assert "Binding bottleneck: data" in html  # the advisor's verdict reaches the report


def test_json_and_markdown(data_analysis, tmp_path) -> None:
    doc = json.loads(write_report(data_analysis, tmp_path / "r.json").read_text())
    assert doc["stepwise_report"] == 1 and doc["summary"]["steps"] == 6
    assert doc["diagnosis"]["bottleneck"] == "data"
    assert len(doc["step_ms"]) == 6
    md = write_report(data_analysis, tmp_path / "r.md").read_text()
    assert md.startswith("# Stepwise report") and "## Top GPU kernels" in md


def test_comparison_section(shared_traces, data_analysis) -> None:
    b = analyse(shared_traces / "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz")
    html = render(data_analysis, "html", compare(data_analysis, b)).decode()
    assert "Comparison: A = " in html and 'id="fig-cmp_steps"' in html
    md = render(data_analysis, "md", compare(data_analysis, b)).decode()
    assert "faster than A" in md


def test_format_from_suffix() -> None:
    assert fmt_for("a.HTML") == "html" and fmt_for("x", "md") == "md"
    with pytest.raises(ValueError):
        fmt_for("a.pdf")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = hostile_trace(tmp_path_factory.mktemp("hostile") / "trace")
    return analyse(folder, label=NAMES[1])


def test_hostile_names_are_text_in_html(hostile) -> None:
    html = render(hostile, "html").decode()
    body = html[: html.index("<script>")]  # everything before plotly.js and the bootstrap
    for bad in ("<script>alert", "<img", "<svg", "</script><script>", "<!--"):
        assert bad not in body, bad
    assert html.count("<script>") == 2  # plotly.js and the bootstrap, nothing else can run
    assert "&lt;script&gt;alert(&#39;xss-script&#39;)&lt;/script&gt;" in body  # shown, as text
    assert "{{7*7}}" in body  # a template-looking name is data, never evaluated


def test_hostile_names_in_markdown_and_json(hostile) -> None:
    md = render(hostile, "md").decode()
    assert not re.search(r"(?<!\\)[<>\[\]]", md.replace("|---", "")), "every bracket is escaped"
    assert "](javascript:" not in md
    doc = json.loads(render(hostile, "json"))
    names = {k["name"] for k in doc["summary"]["top_kernels"]}
    assert f"{NAMES[0]}_kernel" in names  # JSON keeps the exact names (it is data, not markup)


def test_stored_run_exports_its_run_facts_and_telemetry(tmp_path) -> None:
    from profilers.store.runs import RunStore
    from tests.app.fake_runs import fake_run

    record = fake_run(RunStore(tmp_path / "runs"))
    a = analyse(record.run_dir)
    assert a.kind == "run" and a.run is not None and not a.telemetry.empty
    html = render(a, "html").decode()
    assert 'id="fig-telemetry"' in html and 'id="fig-progress"' in html
    assert "(psutil: NVML was not available)" in html
    doc = json.loads(render(a, "json"))
    assert doc["run"]["status"] == "ok" and doc["run"]["spec"]["workload"] == "data_bound"
    # The run's measured steps, whose median is its step time: 5-7 (after 3 warm-up steps, profiled 2-4 left out)
    assert doc["step_ms"] == [52.0, 50.0, 51.0]


def test_a_findings_confidence_is_one_number_in_header_and_body(data_analysis) -> None:
    """The dashboard walk read "verdict confidence 74%" in the header and "confidence 95%" for the same
    finding below. The binding finding shows the header's number, the rule's own beside it when they differ;
    and its "Other rules" are one list item each (they ran together on one line)."""
    d = data_analysis.diagnosis
    assert (
        round(100 * d.confidence) == 74 and round(100 * d.binding.confidence) == 95
    )  # the case that was seen
    md = render(data_analysis, "md").decode()
    assert "**Binding bottleneck: data** (confidence 74%)" in md
    assert (
        "confidence 74% (the rule alone: 95%, lowered because a finding of another bottleneck comes close)."
        in md
    )
    assert "confidence 95%" not in md.split("### 2.")[0].replace("the rule alone: 95%", "")
    others = md[md.index("Other rules that saw the same time:") :].split("\n\n")[0].splitlines()[1:]
    assert len(others) == 2 and all(line.startswith("- **DATA00") for line in others)
    html = render(data_analysis, "html").decode()
    assert "confidence 74%</div>" in html and "confidence 74% (the rule alone: 95%" in html
