"""The Advisor page's time-to-quality panel reads a stored ``optimize --to-quality`` experiment."""

from __future__ import annotations

from typing import Any

import pytest

import cli.optimize_quality as oq
from cli.advisors import main as advisors_main
from tests.advisors.quality.test_decisions import fake_runner
from tests.app.conftest import assert_clean, open_page


def test_advisor_page_draws_a_stored_time_to_quality_experiment(
    store: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(oq, "store_curve_runner", lambda *a, **k: fake_runner())
    assert advisors_main(["optimize", "digits", "--to-quality", "--budget", "300", "--json"]) == 0
    capsys.readouterr()
    at = open_page("advisor")
    assert_clean(at)
    assert any("Time to quality" in e.label for e in at.expander)
    text = " ".join(m.value for m in at.markdown)
    assert "Target:" in text and "batch × 4" in text
    assert any("hours" in i.value or " s" in i.value for i in at.info)
    at.number_input(key="quality.price").set_value(3.0).run()
    assert_clean(at)
    assert any("per device-hour" in i.value for i in at.info)


def test_the_runs_page_links_a_command_line_experiment_to_its_result(
    store: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dashboard walk: a time-to-quality experiment (started on the command line, from no run of the
    list) read "Its result is on the Advisor page of the run it was started from", with no link. It links to the
    Advisor's time-to-quality panel, opened on it, and offers its stored reports."""
    monkeypatch.setattr(oq, "store_curve_runner", lambda *a, **k: fake_runner())
    assert advisors_main(["optimize", "digits", "--to-quality", "--budget", "300", "--json"]) == 0
    capsys.readouterr()
    [exp] = store.list(kind="experiment")
    runs = open_page()
    runs.selectbox(key="runs.pick").set_value(exp.run_id).run()
    assert_clean(runs)
    assert any("started on the command line" in i.value for i in runs.info)
    [link] = [
        p for p in runs.get("page_link") if p.proto.label == "Open its time-to-quality result"
    ]
    assert "quality=" + exp.run_id in link.proto.query_string
    assert [b.proto.label for b in runs.get("download_button")] == [
        "Its report (HTML)",
        "Its report (MD)",
        "Its report (JSON)",
    ]
    at = open_page(None)
    at.query_params["quality"] = exp.run_id
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    [panel] = [e for e in at.expander if "Time to quality" in e.label]
    assert panel.proto.expanded and at.selectbox(key="quality.experiment").value == exp.run_id
