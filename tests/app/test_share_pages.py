"""Advisor, Compare, Report and Rules pages."""

from __future__ import annotations

import re

import pytest

from tests.app.conftest import assert_clean, open_page, plain
from tests.app.fake_runs import fake_run

BEFORE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
AFTER = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"


@pytest.fixture()
def pair(store, shared_traces):
    a = store.import_trace(shared_traces / BEFORE)
    b = store.import_trace(shared_traces / AFTER)
    return a, b


def test_advisor_names_the_data_bottleneck_with_fix(store, pair) -> None:
    at = open_page("runs")
    at.selectbox(key="runs.pick").set_value(pair[0].run_id).run()
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    assert "Binding bottleneck" in at.markdown[0].value or any(
        "Binding bottleneck" in m.value for m in at.markdown
    )
    assert any("**data**" in m.value for m in at.markdown)
    assert at.code, "the fix comes with its code snippet"
    assert any(
        "Apply needs a run launched" in c.value for c in at.caption
    )  # uploads cannot be re-run


def test_advisor_on_a_stored_run(store) -> None:
    fake_run(store)
    at = open_page("advisor")
    assert_clean(at)
    assert at.subheader[-1].value == "Apply the fix"


def test_compare_two_traces(store, pair) -> None:
    at = open_page("compare")
    assert_clean(at)
    at.selectbox(key="compare.a").set_value(pair[0].run_id).run()
    at.selectbox(key="compare.b").set_value(pair[1].run_id).run()
    assert [m.label for m in at.metric] == ["A time per step", "B time per step", "Speed-up of B"]
    assert float(at.metric[2].value.rstrip("×")) > 1.2
    at.selectbox(key="compare.b").set_value(pair[0].run_id).run()
    assert_clean(at)
    assert any("two different runs" in i.value for i in at.info)


def test_compare_needs_two_runs(store) -> None:
    at = open_page("compare")
    assert_clean(at)
    assert at.info


def test_report_downloads(store, pair) -> None:
    at = open_page("report")
    assert_clean(at)
    buttons = at.get("download_button")
    assert [b.proto.label for b in buttons] == [
        "Download HTML report",
        "Download JSON",
        "Download Markdown",
    ]
    at.checkbox(key="report.with_compare").check().run()
    assert_clean(at)
    assert any(
        "Comparison: A = " in plain(m.value) for m in at.markdown
    )  # the preview shows the A-vs-B section


def test_rules_page_lists_every_rule(store) -> None:
    from advisors.rules import RULES

    at = open_page("rules")
    assert_clean(at)
    assert len(at.main.expander) == len(RULES)
    assert len(at.code) >= 5
    looks = [c.value for c in at.caption if c.value.startswith("Looks at:")]
    assert len(looks) == len(RULES) and any(
        "loader" in c.lower() or "next batch" in c for c in looks
    )
    # the docstrings render as Markdown: no reStructuredText role or double-backtick literal is shown raw
    docs = [m.value for m in at.markdown if not m.value.startswith("**Fix:")]
    assert docs and not [d for d in docs if re.search(r":(func|class|mod|meth|attr|data):`|``", d)]


def test_markdown_doc_turns_roles_and_literals_into_code_spans() -> None:
    from reports.advice import markdown_doc

    assert markdown_doc("see :func:`a.b` and :class:`~x.Y`, ``n=1``") == "see `a.b` and `Y`, `n=1`"
