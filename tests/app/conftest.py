"""AppTest fixtures: every test gets its own run store (``STEPWISE_HOME``) and a fresh Streamlit cache.

Each ``AppTest.run`` of a new AppTest scans every installed distribution's metadata for Streamlit components
(``streamlit.components.v2.manifest_scanner``), 56 times in the fast lane (benchmarks/results/test-lane-2026-11-23.md).
The installed packages do not change during a test session, so the scan runs once per session and each AppTest
gets its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import streamlit as st
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import AppTest

from profilers.store.runs import RunStore

REPO = Path(__file__).resolve().parents[2]
MAIN = str(REPO / "app" / "main.py")
TIMEOUT_S = 90


@pytest.fixture(scope="session", autouse=True)
def _components_scanned_once() -> Iterator[None]:
    scan = manifest_scanner.scan_component_manifests
    found: list[Any] = []

    def scanned_once(max_workers: int | None = None) -> list[Any]:
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_scanner, "scan_component_manifests", scanned_once)
        yield


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunStore:
    home = tmp_path / "runs"
    monkeypatch.setenv("STEPWISE_HOME", str(home))
    st.cache_data.clear()
    return RunStore(home)


def open_page(page: str | None = "runs") -> AppTest:
    """Run the real entry script (the first page), then switch to ``views/<page>.py`` (as a click in the nav
    would; the Runs page unless told; ``None``: stay on the first page)."""
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT_S).run()
    if page is not None:
        at.switch_page(f"views/{page}.py").run()
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def plain(markdown: str) -> str:
    """Text as the reader sees it: Markdown backslash escapes removed."""
    import re

    return re.sub(r"\\(.)", r"\1", markdown)


def fix_selector(at: AppTest) -> Any:
    """The Advisor's "Fix to apply" selectbox (keyed by the run it belongs to: ``advisor.fix.<run id>``)."""
    [box] = [s for s in at.selectbox if (s.key or "").startswith("advisor.fix.")]
    return box
