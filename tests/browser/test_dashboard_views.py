"""In a real browser: the Telemetry & memory tab of a 150-step run drawn, first and cached (its time budget is
``benchmarks/dashboard.py``'s: a test on a shared machine waits on conditions, it does not time them); two long kernels with a common
prefix drawn as two bars with their full names on hover; the Events page zooms by dragging and exports the
window for Perfetto; a screenshot of every page (``test-artifacts/``)."""

from __future__ import annotations

import gzip
import subprocess
import sys

import orjson
import pytest
from playwright.sync_api import expect

from tests.browser.flows import (
    chart_titled,
    drawn,
    open_events,
    time_tab,
    upload,
    wait_for_analysis,
)
from tests.browser.harness import REPO, wait_for_app
from tests.trace_factory import kernel, step, write

PREFIX = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_bf16_128x128_32x3_nn_align8_" + "x" * 60
)
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


@pytest.mark.slow
def test_telemetry_tab_of_a_150_step_run_is_drawn_first_and_cached(server, watch) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "profilers",
            "run",
            "compute_bound",
            "--steps",
            "150",
            "--label",
            "steps150",
            "--store",
            str(server.home),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=600,
    )
    page = watch.page
    page.goto(f"{server.url}/analysis")
    wait_for_analysis(page)
    first = time_tab(page, "Telemetry & memory", "Telemetry")
    watch.shot("analysis_telemetry_150_steps")
    page.get_by_role("tab", name="Breakdown").click()
    chart_titled(page, "Step time by category").locator(".main-svg").first.wait_for()
    cached = time_tab(page, "Telemetry & memory", "Telemetry")
    # Printed for the record only: the budget (first ≤ 3 s, cached ≤ 1 s) is benchmarks/dashboard.py's, measured
    # on a quiet machine; here another program on the cores must not fail the test.
    print(f"telemetry tab of a 150-step run: first {first:.2f} s, cached {cached:.2f} s")
    chart = chart_titled(page, "Telemetry")
    expect(
        chart.locator("g.trace").first
    ).to_be_attached()  # the series are drawn, not an empty frame
    assert not watch.page_errors


def test_two_long_kernels_with_a_common_prefix_are_two_bars(server, watch, tmp_path) -> None:
    events = [step(1, 0, 1000), step(2, 1000, 1000)]
    for i, base in enumerate((0, 1000)):
        events += [
            kernel(PREFIX + "_first_variant", base + 10, 300 + i),
            kernel(PREFIX + "_second_variant", base + 400, 200 + i),
        ]
    path = write(tmp_path / "two_long_kernels.json", events)
    page = watch.page
    upload(page, server.url, path)
    wait_for_analysis(page)
    page.get_by_role("tab", name="Kernels & operators").click()
    chart = chart_titled(page, "Top GPU kernels")
    chart.locator(".main-svg").first.wait_for()
    bars = chart.locator("g.point")
    rows = {
        round(b["y"] + b["height"] / 2)
        for b in (bars.nth(i).bounding_box() for i in range(bars.count()))
    }
    assert bars.count() == 2 and len(rows) == 2  # two bars on two rows, not one merged row
    assert chart.locator(".ytick").count() == 2
    bars.nth(
        0
    ).scroll_into_view_if_needed()  # the page grew (MFU, outcome words): hover where the bar is seen
    bar = bars.nth(0).bounding_box()
    page.mouse.move(
        bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] / 2
    )  # plotly hovers via its drag layer
    page.locator(".hoverlayer .hovertext").first.wait_for()
    hover = page.locator(".hoverlayer .hovertext").first.text_content().replace("\n", "")
    assert "_variant" in hover and "cutlass_80_tensorop" in hover  # the full name, start and end
    watch.shot("kernels_common_prefix")
    assert not watch.page_errors


def test_events_page_zooms_and_exports_the_window(server, watch, shared_traces, tmp_path) -> None:
    page = watch.page
    upload(page, server.url, shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz")
    wait_for_analysis(page)
    open_events(page, server.url, "kineto_resnet50_num_workers_0")
    end_input = page.get_by_label("To (ms)")
    before = end_input.input_value()
    whole = float(before)
    plot = chart_titled(page, "Timeline of rank").locator(".nsewdrag").first
    box = plot.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.40, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.45, y, steps=8)
    page.mouse.up()
    expect(end_input).not_to_have_value(before)  # the box became the window
    wait_for_app(page)
    lo, hi = float(page.get_by_label("From (ms)").input_value()), float(end_input.input_value())
    assert 0.3 * whole < lo < hi < 0.5 * whole
    page.get_by_text("Zoom in to at most", exact=False).or_(
        chart_titled(page, "events of this window")
    ).first.wait_for()
    watch.shot("events_zoomed")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download this window", exact=False).click()
    target = tmp_path / "window.json.gz"
    info.value.save_as(target)
    doc = orjson.loads(gzip.decompress(target.read_bytes()))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans and all(
        e["ts"] < hi * 1000 + 1 and e["ts"] + e["dur"] > lo * 1000 - 1 for e in spans
    )
    assert not watch.page_errors


def test_screenshot_of_every_page(server, watch, shared_traces) -> None:
    page = watch.page
    page.set_viewport_size({"width": 1400, "height": 2400})
    upload(
        page,
        server.url,
        shared_traces / "communication/param_dlrm_8_ranks/worker0.pt.trace.json.gz",
    )
    wait_for_analysis(page)
    for name in PAGES:
        page.goto(f"{server.url}/{name}")
        page.locator(
            "h1"
        ).first.wait_for()  # the script run has started (the title is its first element)
        wait_for_app(page, settle_ms=1500)
        drawn(page)
        watch.shot(f"page_{name or 'home'}")
        # every page's sidebar leads home
        expect(page.get_by_test_id("stSidebarNav").get_by_role("link", name="Home")).to_be_visible()
    page.goto(f"{server.url}/analysis")
    wait_for_analysis(page)
    for tab in ("Breakdown", "Timeline", "Kernels & operators", "Telemetry & memory", "Ranks"):
        page.get_by_role("tab", name=tab).click()
        wait_for_app(page)
        drawn(page)
        watch.shot(f"page_analysis_{tab.split()[0].lower()}")
    assert not watch.page_errors
