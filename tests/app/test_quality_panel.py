"""The Advisor page's time-to-quality panel reads a stored ``optimize --to-quality`` experiment."""

from __future__ import annotations

from typing import Any

import pytest

import cli.optimize_quality as oq
from cli.advisors import main as advisors_main
from tests.advisors.quality.test_decisions import fake_runner
from tests.app.conftest import assert_clean, open_page


def test_advisor_page_draws_a_stored_time_to_quality_experiment(store: Any, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
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
