"""Real-browser fixtures: one dashboard server (private run store) and one Chromium per module.

The tests need Debian's chromium (``scripts/test.sh`` installs it). Without it they are skipped with the reason;
with it they always run. Screenshots go to ``test-artifacts/`` (gitignored).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from playwright.sync_api import expect

from tests.browser.harness import ARTIFACTS, CHROMIUM, chromium, dashboard

# ``expect`` assertions wait as long as the pages' own default (set below): 5 s is short on a loaded machine.
expect.set_options(timeout=90_000)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test here ``browser``; outside CI, skip them (saying why) when Chromium is not installed."""
    here = str(Path(__file__).parent)
    missing = not os.path.exists(CHROMIUM)
    skip = pytest.mark.skip(
        reason=f"{CHROMIUM} is missing: run scripts/test.sh, which installs Debian's chromium"
    )
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.browser)
            # In CI a missing browser is a broken install step: the tests run and fail, never skip.
            if missing and not os.environ.get("CI"):
                item.add_marker(skip)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("dashboard")
    with dashboard(root / "runs", root / "streamlit.log") as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


class PageWatch:
    """A page plus everything it reported: console errors, uncaught exceptions, dialogs (none expected)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []
        page.on(
            "console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture()
def watch(browser: Any) -> Iterator[PageWatch]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    yield PageWatch(page)
    context.close()
