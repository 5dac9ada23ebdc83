"""Steps a person takes in the dashboard, shared by the browser tests and the benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ANALYSIS_READY = "[data-testid='stMetric']"


def upload(page: Any, url: str, files: list[Path] | Path) -> None:
    """Open the Upload page and drop ``files`` on the uploader."""
    page.goto(f"{url}/upload")
    page.get_by_role("heading", name="Upload traces").wait_for()
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(files)


def wait_for_analysis(page: Any) -> None:
    """Until the Analysis page shows its figures and at least one rendered chart."""
    page.get_by_role("heading", name="Analysis", exact=True).wait_for()
    page.locator(ANALYSIS_READY).first.wait_for()
    page.locator(".js-plotly-plot .main-svg").first.wait_for()


def download_report(page: Any, url: str, target: Path, label: str = "Download HTML report") -> Path:
    """Open the Report page (its run is the session's selected one) and save the HTML export to ``target``."""
    page.goto(f"{url}/report")
    button = page.get_by_role("button", name=label)
    button.wait_for()
    with page.expect_download() as info:
        button.click()
    info.value.save_as(target)
    return target


def open_offline(context: Any, path: Path) -> tuple[Any, list[str]]:
    """Open a file with every non-``file://`` request aborted; returns the page and the blocked URLs."""
    blocked: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    return page, blocked


def chart_titled(page: Any, title: str) -> Any:
    """The rendered plotly chart whose title contains ``title``."""
    return page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text=title))


def time_tab(page: Any, tab: str, chart_title: str) -> float:
    """Seconds from clicking the Analysis tab ``tab`` to its chart titled ``chart_title`` being drawn."""
    import time

    t0 = time.perf_counter()
    page.get_by_role("tab", name=tab).click()
    chart_titled(page, chart_title).locator(".main-svg").first.wait_for()
    return time.perf_counter() - t0


def open_events(page: Any, url: str, run_label: str) -> None:
    """Open the Events page on the run whose picker line contains ``run_label``."""
    page.goto(f"{url}/events")
    page.get_by_role("heading", name="Events", exact=True).wait_for()
    box = page.get_by_test_id("stSelectbox").first
    if run_label not in box.inner_text():
        box.click()
        page.get_by_role("option", name=run_label, exact=False).first.click()
    chart_titled(page, "Timeline of rank").locator(".main-svg").first.wait_for()


def drawn(page: Any, timeout_ms: int = 30_000) -> None:
    """Until no element is still a loading skeleton (tables and code blocks draw after the script run ends)."""
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid^='stSkeleton']\")", timeout=timeout_ms
    )
