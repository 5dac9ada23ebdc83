"""In a real browser, with real training runs: launch the tiny ``data_bound`` workload, follow it live, ask the
advisor, apply the advised fix and see the before/after chart. Slow (several tiny runs on a CPU)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from profilers.run.records import RunStatus
from profilers.store.runs import RunStore
from tests.browser.harness import dashboard, wait_for_app
from tests.fresh_checkout import fresh_checkout, readme_command

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The dashboard as the README starts it: ``bash scripts/dashboard.sh`` in a fresh checkout, no store given."""
    root = fresh_checkout(tmp_path_factory.mktemp("checkout"))
    readme = (root, readme_command("bash scripts/dashboard.sh"))
    with dashboard(
        root / "runs", tmp_path_factory.mktemp("logs") / "streamlit.log", command=readme
    ) as s:
        yield s


RUN_TIMEOUT_MS = 240_000
EXPERIMENT_TIMEOUT_MS = 900_000


def test_launch_apply_before_after(server, watch) -> None:
    page = watch.page
    page.goto(f"{server.url}/launch")
    page.get_by_role("heading", name="Launch a run").wait_for()
    page.get_by_role("button", name="Start").click()
    page.get_by_role("heading", name="Live").wait_for()
    page.get_by_text(re.compile(r"^(Finished: |Profiled |Ended |Cancelled by you)")).wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    watch.shot("launch_finished")
    # the workload's script, profiled then stopped at the end of its steps as any launched script is
    assert (
        page.get_by_text(
            re.compile(r"^Profiled \d+ steps of your script, then stopped it after step \d+")
        ).count()
        == 1
    )
    (launched,) = RunStore(server.home).list(
        kind="launch"
    )  # the default store, ./runs of the checkout
    assert launched.status is RunStatus.OK, launched
    # Click once the page is idle, as a person would after reading the result: a click while the page's last
    # auto-refresh is still in flight is folded into that rerun by Streamlit (the newer request's page wins).
    wait_for_app(page)
    page.get_by_role("link", name="Ask the advisor").click()
    page.get_by_role("heading", name="Advisor").wait_for()
    page.get_by_text("Apply the fix").wait_for()
    watch.shot("advisor_launched_run")
    # data_bound is built to be data-bound; on a loaded 2-core machine another class can edge ahead, and the
    # test applies whatever the advisor advises (the default fix in the selectbox).
    page.get_by_role("heading", name=re.compile(r"^Binding bottleneck: ")).wait_for()
    page.get_by_label("Runs per arm").fill("2")
    page.get_by_label("Runs per arm").press("Enter")
    page.get_by_role("spinbutton", name="Up to pairs").fill(
        "2"
    )  # no more: beside another test they are competed for
    page.get_by_role("spinbutton", name="Up to pairs").press("Enter")
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("baseline run 1 of 2", exact=False).wait_for()
    watch.shot("apply_running")
    page.get_by_text("Step time before and after", exact=False).wait_for(
        timeout=EXPERIMENT_TIMEOUT_MS
    )
    page.get_by_text("Breakdown before vs after").wait_for()
    page.get_by_text("Loss curves overlaid").wait_for()
    page.get_by_text("Step time before and after", exact=False).scroll_into_view_if_needed()
    watch.shot("apply_before_after")
    assert not watch.page_errors and not watch.dialogs
    with page.expect_download() as info:
        page.get_by_role("button", name="Report with this fix (HTML)").click()
    html = info.value.path().read_text()
    assert "Applied fix: " in html and 'id="fig-exp_steps"' in html
    # one outcome and one speed-up, as the card, the downloaded report and the Report page show them (issue 41)
    outcome = page.get_by_text(re.compile(r"^Outcome: ")).first.inner_text().strip()
    speedups = (
        page.get_by_test_id("stMetric").filter(has_text="Speed-up").get_by_test_id("stMetricValue")
    )
    speedup = speedups.first.inner_text().strip() if speedups.count() else None
    assert outcome.replace("'", "&#39;").replace('"', "&#34;") in html, outcome
    page.goto(f"{server.url}/report")
    page.get_by_text("Preview (Markdown)").click()
    page.get_by_text("Experiments on this run", exact=True).wait_for(timeout=RUN_TIMEOUT_MS)
    row = page.get_by_role("row").filter(has_text="Apply ").first.inner_text()
    assert outcome.removeprefix("Outcome: ") in row and (speedup is None or speedup in row), (
        outcome,
        speedup,
        row,
    )


def test_cancel_leaves_a_killed_run(server, watch) -> None:
    page = watch.page
    page.goto(f"{server.url}/launch")
    page.get_by_role("heading", name="Launch a run").wait_for()
    page.get_by_label("steps", exact=True).fill("500")
    page.get_by_role("button", name="Start").click()
    page.get_by_role("button", name="Cancel run").wait_for(timeout=RUN_TIMEOUT_MS)
    page.get_by_text(re.compile(r"step [1-9]\d* of 500")).wait_for(timeout=RUN_TIMEOUT_MS)
    page.get_by_role("button", name="Cancel run").click()
    # The countdown stops with the click, and the end is the user's cancel, not a crash. "stopping" is shown only
    # while the process is still going down: on a busy machine it can be gone before the page's next refresh
    # (the end is then drawn at once), so the wait is for either, and the countdown must be gone in both.
    ended = page.get_by_text(re.compile(r"^Cancelled by you at step \d+\.$"))
    page.get_by_text(re.compile(r"step \d+ of 500 · stopping")).or_(ended).first.wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    expect(page.get_by_text(re.compile(r"s left"))).to_have_count(0)
    ended.wait_for(timeout=RUN_TIMEOUT_MS)
    assert page.get_by_text("SIGTERM").count() == 0
    watch.shot("launch_cancelled")
    page.goto(f"{server.url}/runs")
    page.get_by_role("heading", name="Runs").wait_for()
    expect(page.get_by_role("combobox", name="Selected run")).to_have_value(
        re.compile(r" · launch · killed · ")
    )
