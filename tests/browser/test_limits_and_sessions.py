"""In a real browser: a file over the upload limit is refused with a message and the page keeps working; two
browser sessions at once keep their own selection (per-session state only)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.flows import upload, wait_for_analysis
from tests.browser.harness import dashboard


@pytest.fixture(scope="module")
def small_limit_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("limit")
    with dashboard(root / "runs", root / "streamlit.log", ("--server.maxUploadSize", "1")) as s:
        yield s


def test_file_over_the_limit_is_refused_and_the_page_keeps_working(
    small_limit_server, watch, shared_traces, tmp_path
) -> None:
    page = watch.page
    big = tmp_path / "big.json"
    big.write_bytes(b'{"traceEvents": [' + b" " * (2 * 1024**2) + b"]}")
    upload(page, small_limit_server.url, big)
    page.get_by_text("Size limit: 1 MB per file").wait_for()
    page.get_by_text("1.0MB or smaller", exact=False).or_(
        page.get_by_text("exceeds", exact=False)
    ).first.wait_for()
    watch.shot("upload_over_limit")
    assert not list((small_limit_server.home).glob("2*")), "nothing stored"
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(
        shared_traces / "edge/hta_no_rank_info.json.gz"
    )
    wait_for_analysis(page)  # the same page, still working, takes a good file


def test_two_sessions_keep_their_own_selection(server, browser, shared_traces) -> None:
    contexts = [browser.new_context(viewport={"width": 1300, "height": 900}) for _ in range(2)]
    try:
        pages = [c.new_page() for c in contexts]
        files = [
            shared_traces / "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz",
            shared_traces / "host/tracelens_h100_bert-small.json.gz",
        ]
        for page, f in zip(pages, files):
            page.set_default_timeout(90_000)
            upload(page, server.url, f)
            wait_for_analysis(page)
        for page, f in zip(pages, files):  # each session still shows the trace it uploaded
            page.get_by_role("link", name="Advisor").first.click()
            page.get_by_role("heading", name="Advisor").wait_for()
            expect(page.get_by_role("combobox", name="Run")).to_have_value(
                re.compile(re.escape(f.name))
            )
    finally:
        for c in contexts:
            c.close()
