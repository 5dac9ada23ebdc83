"""In a real browser: upload a trace and see its bottleneck named; download the report and open it offline;
hostile names in a trace run no script, neither in the dashboard nor in the exported report."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.browser.flows import download_report, open_offline, upload, wait_for_analysis
from tests.reports.hostile import NAMES, hostile_trace

DATA_TRACE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"


def test_upload_names_the_data_bottleneck(server, watch, shared_traces) -> None:
    page = watch.page
    upload(page, server.url, shared_traces / DATA_TRACE)
    wait_for_analysis(page)
    page.get_by_role("heading", name="Binding bottleneck: data").wait_for()
    assert (
        page.get_by_text("num_workers", exact=False).count() >= 1
    )  # the advisor's sentence names the fix
    watch.shot("upload_data_bottleneck")
    page.goto(f"{server.url}/advisor")
    page.get_by_role("heading", name="Binding bottleneck: data").wait_for()
    page.locator("[data-testid='stCode']").first.wait_for()  # the fix's code snippet
    watch.shot("advisor_data_bottleneck")
    assert not watch.page_errors and not watch.dialogs


def _open_report(
    browser, path: Path, shot: str
) -> tuple[int, list[str], list[str], list[str], str]:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    context.set_default_timeout(
        90_000
    )  # every figure rendered offline by a GPU-less Chromium on a busy machine
    try:
        page, blocked = open_offline(context, path)
        errors: list[str] = []
        dialogs: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(path.as_uri())
        expected = page.locator("div.figure").count()
        page.wait_for_function(
            f"document.querySelectorAll('[data-rendered=true]').length === {expected}"
        )
        rendered = page.locator("[data-rendered=true] .main-svg").count()
        from tests.browser.harness import ARTIFACTS

        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
        return rendered, blocked, errors, dialogs, page.inner_text("body")
    finally:
        context.close()


def test_report_downloads_and_opens_offline(
    server, watch, browser, shared_traces, tmp_path
) -> None:
    upload(watch.page, server.url, shared_traces / DATA_TRACE)
    wait_for_analysis(watch.page)
    report = download_report(watch.page, server.url, tmp_path / "report.html")
    rendered, blocked, errors, dialogs, text = _open_report(browser, report, "report_offline")
    assert rendered >= 5, "the charts render from the file alone"
    assert blocked == [] and errors == [] and dialogs == []
    assert "binding bottleneck: data" in text.lower()


def test_hostile_names_run_no_script(server, watch, browser, tmp_path) -> None:
    folder = hostile_trace(tmp_path / "hostile")
    archive = Path(shutil.make_archive(str(tmp_path / "ranks"), "zip", folder))
    named = archive.with_name(f"{NAMES[1]}.zip")
    archive.rename(named)
    page = watch.page
    upload(page, server.url, named)
    wait_for_analysis(page)
    page.get_by_role("tab", name="Kernels & operators").click()
    page.get_by_role("tab", name="Ranks").click()
    watch.shot("hostile_dashboard")
    report = download_report(page, server.url, tmp_path / "hostile.html")
    rendered, blocked, errors, dialogs, text = _open_report(browser, report, "hostile_report")
    assert watch.dialogs == [] and watch.page_errors == []
    assert dialogs == [] and errors == [] and blocked == []
    assert rendered >= 5
    assert NAMES[0] in text and "onerror=alert('xss-img')" in text  # shown as text, never run
