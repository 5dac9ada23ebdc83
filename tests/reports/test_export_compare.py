"""A comparison exports like a report: the gate's verdict first, both sides, what moved; names stay text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisors.analysis import analyse
from reports.compare import compare, regression_check
from reports.export import render_comparison, write_comparison
from tests.reports.hostile import NAMES, hostile_trace

FAST = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"
SLOW = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"


@pytest.fixture(scope="module")
def pair(shared_traces):
    return analyse(shared_traces / FAST, label="workers=4"), analyse(
        shared_traces / SLOW, label="workers=0"
    )


def test_every_format(pair, tmp_path) -> None:
    a, b = pair
    c, tables = regression_check(a, b), compare(a, b)
    html = write_comparison(c, tables, tmp_path / "c.html").read_text()
    assert (
        "Verdict: regression" in html
        and "workers=4 → workers=0" in html
        and html.count("<script>") == 2
    )
    assert 'id="fig-cmp_steps"' in html and "Categories that moved most" in html
    page = html[: html.index("<script>")]
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no network reference"
    doc = json.loads(write_comparison(c, tables, tmp_path / "c.json").read_text())
    assert doc["verdict"] == "regression" and doc["movers"]["categories"][0]["name"] == "dataloader"
    assert doc["step_ms"]["new"] == list(
        tables.step_ms_b
    )  # the page's samples are the verdict's samples
    md = write_comparison(c, tables, tmp_path / "c.md").read_text()
    assert md.startswith("# Stepwise comparison") and "## Operators that moved most" in md


def test_the_gate_and_the_page_agree_with_the_command_line(pair, shared_traces) -> None:
    from advisors.compare.regression import check, check_json
    from advisors.compare.sides import observe_side

    a, b = pair
    cli = check_json(
        check(
            observe_side(shared_traces / FAST, "workers=4"),
            observe_side(shared_traces / SLOW, "workers=0"),
        )
    )
    page = check_json(regression_check(a, b))
    assert page == cli


def _slower(folder: Path, to: Path) -> Path:
    """The same hostile trace with every event twice as long, so every hostile name moves."""
    to.mkdir()
    for f in folder.iterdir():
        doc = json.loads(f.read_text())
        doc["traceEvents"] = [
            {**e, "ts": 2 * e["ts"], "dur": 2 * e["dur"]} for e in doc["traceEvents"]
        ]
        (to / f.name).write_text(json.dumps(doc))
    return to


def test_hostile_names_stay_text(tmp_path) -> None:
    folder = hostile_trace(tmp_path / "trace")
    h, slow = (
        analyse(folder, label=NAMES[1]),
        analyse(_slower(folder, tmp_path / "slow"), label=NAMES[0]),
    )
    c, tables = regression_check(h, slow), compare(h, slow)
    assert any(NAMES[0] in m.name for m in c.movers.operators)  # hostile names reach the tables
    html = render_comparison(c, tables, "html").decode()
    body = html[: html.index("<script>")]
    for bad in ("<script>alert", "<img", "<svg", "</script><script>", "<!--"):
        assert bad not in body, bad
    assert "&#34;&gt;&lt;img src=x" in body  # the label is shown, as text
    md = render_comparison(c, tables, "md").decode()
    assert not re.search(r"(?<!\\)[<>\[\]]", md.replace("|---", "")), "every bracket is escaped"
