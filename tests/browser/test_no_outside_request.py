"""In a real browser: no page of the dashboard makes a request that leaves this machine, answers one of its own
requests with an error, or logs a console error (issue 33: a failed outside name lookup and 404s on every
page). Every request is recorded; the machine's own server (localhost / 127.0.0.1) is the only host allowed.
Each page's first-view time is printed for the record (the measured figures are ``benchmarks/``'s)."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlparse

from tests.browser.flows import drawn, upload, wait_for_analysis
from tests.trace_factory import kernel, step, write

#: Streamlit's own probe when a page is opened by its address (streamlit/streamlit#7074, open): the front end tries
#: ``/<page>/_stcore/health`` and ``/<page>/_stcore/host-config`` as if ``<page>`` were a base path, gets 404, then
#: the real ``/_stcore/…``. Local, harmless and not ours to change without patching Streamlit; every other 404 fails.
STREAMLIT_PROBE = re.compile(r"^http://localhost:\d+/[a-z_]+/_stcore/(?:health|host-config)$")
PAGES = (
    "",
    "runs",
    "launch",
    "upload",
    "analysis",
    "events",
    "advisor",
    "compare",
    "report",
    "rules",
)
LOCAL = {"localhost", "127.0.0.1", "[::1]", "::1"}


def _record(page: Any) -> tuple[list[str], list[str], list[Any]]:
    outside: list[str] = []
    failed: list[str] = []
    console: list[Any] = []
    page.on("console", lambda m: console.append(m))

    def on_request(r: Any) -> None:
        url = urlparse(r.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.hostname not in LOCAL:
            outside.append(r.url)

    page.on("request", on_request)

    def on_failed(r: Any) -> None:
        # moving to the next page cancels the last one's pending script loads (net::ERR_ABORTED): the browser's
        # doing, not a failed request; an outside host, or any other failure, is recorded
        if urlparse(r.url).hostname in LOCAL and "ERR_ABORTED" in str(r.failure):
            return
        failed.append(f"{r.url} ({r.failure})")

    page.on("requestfailed", on_failed)
    page.on(
        "response",
        lambda r: (
            failed.append(f"{r.url} → {r.status}")
            if r.status >= 400 and not STREAMLIT_PROBE.match(r.url)
            else None
        ),
    )
    return outside, failed, console


def test_no_page_requests_anything_outside_or_logs_an_error(server, watch, tmp_path) -> None:
    page = watch.page
    outside, failed, console = _record(page)
    ev = []
    for i in range(3):
        ev += [step(i, i * 1000, 1000), kernel("ampere_sgemm_128x64_nn", i * 1000 + 10, 800)]
    upload(page, server.url, write(tmp_path / "small.json", ev))
    wait_for_analysis(page)
    timings = {}
    for name in PAGES:
        t0 = time.perf_counter()
        page.goto(f"{server.url}/{name}")
        page.locator("h1").first.wait_for()
        drawn(page)
        timings[name or "home"] = time.perf_counter() - t0
    print("first view, s: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    assert outside == [], outside
    assert failed == [], failed
    # Chromium logs each 404 as "Failed to load resource"; the probe's are told apart by their location
    probes = [u for u in (m.location.get("url", "") for m in console) if STREAMLIT_PROBE.match(u)]
    errors = [
        m.text
        for m in console
        if m.type == "error" and not STREAMLIT_PROBE.match(m.location.get("url", ""))
    ]
    assert errors == [], errors
    assert len(probes) <= 2 * len(
        PAGES
    )  # at most the probe's two requests per page opened by address
    assert watch.page_errors == [], watch.page_errors
