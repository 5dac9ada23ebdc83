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
