"""In a real browser, the live page follows a real watched run to its end: a user-style script whose later samples
are expensive to decode (``tests/scripts/watch/slowing_decode.py``) is run by ``stepwise watch``; the page draws
the whole run, one capture appears in its list and on the chart (a marker whose hover names its trigger), and the
run ends as finished. Slow (a real training run on a CPU)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profilers.store.runs import RunStore
from tests.browser.harness import wait_for_app

pytestmark = [pytest.mark.slow, pytest.mark.timed]

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "tests" / "scripts" / "watch" / "slowing_decode.py"
RUN_TIMEOUT_MS = 300_000


def _watched_run(home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "STEPWISE_HOME": str(home)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stepwise",
            "watch",
            "--json",
            "--",
            sys.executable,
            str(DECODE),
            "--steps",
            "1180",
            "--change-at",
            "1100",
        ],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = (
            [r for r in RunStore(home).list(kind="launch") if r.parent is None]
            if home.is_dir()
            else []
        )
        if runs:
            return proc, runs[0].run_id
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("stepwise watch stored no run within 2 minutes")


def test_the_live_page_follows_a_watched_run_to_its_end_with_its_capture(server, watch) -> None:
    proc, run_id = _watched_run(Path(server.home))
    page = watch.page
    page.goto(f"{server.url}/launch?follow={run_id}")
    page.get_by_role("heading", name="Live").wait_for()
    page.get_by_text(re.compile(r"^Captures")).wait_for()
    watch.shot("watch_live_running")
    line = page.get_by_text(re.compile(r"captured steps [\d,]+–[\d,]+: "))  # 1,143–1,145
    line.first.wait_for(timeout=RUN_TIMEOUT_MS)
    page.get_by_text(re.compile(r"^Finished: ok after 1180 steps")).wait_for(timeout=RUN_TIMEOUT_MS)
    out, _ = proc.communicate(timeout=120)
    report = json.loads(out)
    assert report["status"] == "ok" and report["captures"], report
    first = report["captures"][0]
    wait_for_app(page)
    chart = page.locator(".js-plotly-plot").filter(has_text="The whole run")
    chart.first.scroll_into_view_if_needed()
    watch.shot("watch_live_finished")
    assert (
        "1 capture marked" in chart.first.inner_text()
        or "captures marked" in chart.first.inner_text()
    )
    # the capture's marker on the chart (the only trace drawn as points), and its hover: the trigger that fired it
    points = chart.first.locator(".scatterlayer path.point")
    assert points.count() == len(report["captures"])
    points.first.hover(force=True)
    hover = chart.first.locator(".hoverlayer")
    hover.get_by_text(re.compile("trigger: ")).first.wait_for(timeout=10_000)
    assert f"trigger: {first['trigger']['kind']} at step {first['trigger']['step']}" in (
        hover.text_content() or ""
    )
    assert (
        page.get_by_text(
            re.compile(rf"captured steps {first['steps'][0]:,}–{first['steps'][1]:,}: ")
        ).count()
        >= 1
    )
    assert not watch.page_errors and not watch.dialogs
