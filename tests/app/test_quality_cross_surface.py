"""One home per fact (issue 41) for a to-quality experiment: the stored record (``view.json``) is what the Advisor
page's quality panel, the stored Markdown and HTML reports and ``--json``'s ``record`` show — the same predicted
and measured parts, verdicts and early stopping's trade-off line on every surface."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

import advisors.experiments.to_quality_goodput as goodput
import cli.optimize_quality as oq
from advisors.experiments.results.quality_record import QualityRecord
from advisors.experiments.results.stored_view import read_view
from cli.advisors import main as advisors_main
from profilers.store import experiments
from reports.quality import cell
from tests.advisors.quality.test_goodput import fake_runner, recorded_probe
from tests.app.conftest import assert_clean, open_page, plain


def _stored(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Any:
    """``optimize digits --to-quality --json`` on recorded curves whose noise scale is known (so the batch rounds
    carry predictions) and whose loss plateaus (so early stopping is a trade-off)."""
    runs = tmp_path / "recorded"
    runs.mkdir()
    monkeypatch.setattr(
        oq, "store_curve_runner", lambda *a, **k: fake_runner(runs, 5000.0, plateau_at=1.0)
    )
    monkeypatch.setattr(goodput, "store_probe", lambda *a, **k: recorded_probe)
    assert advisors_main(["optimize", "digits", "--to-quality", "--budget", "300", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_panel_the_reports_and_json_render_the_one_stored_record(
    store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _stored(store, tmp_path, monkeypatch, capsys)
    seen = read_view(experiments.view(store, out["experiment_id"]))
    assert seen is not None and seen.quality is not None
    rec = seen.quality
    assert QualityRecord.from_json(out["record"]) == rec  # --json carries the stored record itself
    predicted = [r for r in rec.rounds if r.prediction_text]
    [trade] = [r for r in rec.rounds if r.tradeoff]
    assert predicted and trade.outcome == "trade-off" and trade.tradeoff.startswith("judged on")
    facts = [
        rec.target,
        *(r.prediction_text for r in predicted),
        trade.tradeoff,
        *(f"| {r.round} | " for r in rec.rounds),
        *(cell(r) for r in rec.rounds),
        *(r.ratio_text for r in rec.rounds if r.ratio is not None),
    ]
    verdicts = [f"| {r.outcome} |" for r in rec.rounds]

    report_dir = store.path(out["experiment_id"])
    md = plain(html.unescape((report_dir / "report.md").read_text(encoding="utf-8")))
    page = plain(html.unescape((report_dir / "report.html").read_text(encoding="utf-8")))
    at = open_page(None)
    at.query_params["quality"] = out["experiment_id"]
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    panel = plain(html.unescape(" ".join(m.value for m in at.markdown)))
    captions = " ".join(c.value for c in at.caption)
    for name, surface in (("md", md), ("html", page), ("panel", panel)):
        for fact in [*facts, *verdicts]:
            assert fact in surface, (name, fact)
    assert trade.reason[:80] in captions
    assert rec.projection and any(
        plain(i.value) == rec.projection for i in at.info
    )  # the stored sentence
