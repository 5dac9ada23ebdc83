"""The Events page's panels: a zoomable, server-re-bucketed timeline window, the events of a small window one
by one, the Perfetto export, and a memory snapshot's curve over time with the stacks of its top sites."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, state
from app.widgets import perfetto_open, ui, url_state
from profilers.errors import StepwiseError
from profilers.run.records import RunRecord
from profilers.trace.memory_snapshot import GIB
from reports.events import charts as charts_events
from reports.events.window import MAX_EVENTS, clamp_window, window_events, window_timeline
from reports.events.perfetto import INSTRUCTIONS, perfetto_gzip

CHART_KEY = "events.chart"


def list_ranks(folder: object) -> list[object]:
    from profilers.trace.sources import find_trace_files

    return list(find_trace_files(str(folder)))


def _zoom_to_selection() -> None:
    """Callback of a box drawn on the window chart: the box's time range becomes the window."""
    chart = st.session_state.get(CHART_KEY)
    box = (chart or {}).get("selection", {}).get("box", []) if chart else []
    xs = [float(x) for b in box for x in b.get("x", [])]
    if len(xs) >= 2 and max(xs) > min(xs):
        state.set_event_window(min(xs), max(xs))


def trace_view(record: RunRecord) -> None:
    folder = data.many_ranks(record)
    if folder is not None:  # its events are opened one rank at a time: never every rank's at once
        st.info(
            f"{ui.text(record.label)} holds {len(list_ranks(folder))} ranks, read as their summaries. Open "
            "one rank's trace on the Job page (the straggler's first) to see its events and export it.",
            icon=":material/grid_view:",
        )
        st.page_link(
            "views/job.py",
            label="Open the job",
            icon=":material/grid_view:",
            query_params={"folder": str(folder)},
        )
        return
    try:
        with st.spinner("Loading the trace's events (once per file; later windows are instant)…"):
            trace, index = data.event_trace(record, state.upload_digest(record.run_id))
    except StepwiseError as err:
        st.error(f"{ui.text(record.label)} cannot be read: {ui.text(err)}")
        return
    if not index.ranks:
        st.info("This trace has no steps, so there is no step timeline to zoom into.")
        return
    rank = (
        st.selectbox("Rank", index.ranks, key="events.rank")
        if len(index.ranks) > 1
        else index.ranks[0]
    )
    start, end = state.event_window(record.run_id, index.span_ms)
    linked = url_state.events_window(
        record.run_id
    )  # ``?from=…&to=…``: a reload or a link keeps the window
    if linked is not None:
        fitted = clamp_window(index, *linked)
        if (
            max(abs(fitted[0] - linked[0]), abs(fitted[1] - linked[1])) >= 1e-3
        ):  # said, never silently another
            why = (
                "is reversed"
                if linked[0] > linked[1]
                else f"lies outside this trace's {index.span_ms:,.3f} ms"
            )
            st.info(
                f"The link's window {linked[0]:g}–{linked[1]:g} ms {why}: showing {fitted[0]:,.3f}–"
                f"{fitted[1]:,.3f} ms.",
                icon=":material/info:",
            )
        state.set_event_window(*fitted)
        start, end = state.event_window(record.run_id, index.span_ms)
    cols = st.columns([2, 2, 1, 1])
    cols[0].number_input(
        "From (ms)",
        min_value=0.0,
        max_value=index.span_ms,
        step=1.0,
        format="%.3f",
        key=state.EVENTS_START,
    )
    cols[1].number_input(
        "To (ms)",
        min_value=0.0,
        max_value=index.span_ms,
        step=1.0,
        format="%.3f",
        key=state.EVENTS_END,
    )
    mid, half = (start + end) / 2, (end - start)
    cols[2].button(
        "Zoom out ×2",
        on_click=state.set_event_window,
        args=(max(0.0, mid - half), min(index.span_ms, mid + half)),
    )
    cols[3].button("Whole trace", on_click=state.set_event_window, args=(0.0, index.span_ms))
    start, end = clamp_window(index, start, end)
    url_state.show_events_window(record.run_id, start, end)
    tl = window_timeline(index, int(rank), start, end)
    st.plotly_chart(
        charts_events.window(tl, index.spans, int(rank), start, end),
        key=CHART_KEY,
        theme=None,
        on_select=_zoom_to_selection,
        selection_mode="box",
        config={"displaylogo": False},
    )
    st.caption(
        f"Drag across the chart to zoom: the server re-buckets that window ({len(tl)} buckets of "
        f"{(end - start) / max(len(tl), 1):.4g} ms here) from the {index.n_events:,} events it holds; the "
        "browser never receives the raw trace."
    )
    ev, n = window_events(trace, index, int(rank), start, end)
    if ev is None:
        st.info(
            f"{n:,} events of rank {rank} overlap this window: zoom in to at most {MAX_EVENTS:,} to see them "
            "one by one."
        )
    elif n:
        ui.chart(charts_events.events(ev, start, end), key="events.list")
    export_panel(record, index.origin_ns, start, end)


def export_panel(record: RunRecord, origin_ns: int, start: float, end: float) -> None:
    """Two downloads, built only when clicked: the whole trace and the current window, from the trace's own
    files (every event's args, the CPU → GPU flows and the instant events stay)."""
    st.subheader("Open it in Perfetto")
    st.markdown("\n".join(INSTRUCTIONS))
    st.caption(
        "Both files keep everything the trace holds: its args, the CPU launch → GPU kernel flows and the "
        "instant events. The window keeps events crossing its edges whole, and a flow only when both its "
        "ends are in it."
    )
    source = data.trace_source(record)
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in record.label)[:60] or "trace"
    lo, hi = origin_ns + int(start * 1e6), origin_ns + int(end * 1e6)
    cols = st.columns(2)
    cols[0].download_button(
        "Download the whole trace (.json.gz)",
        data=lambda: perfetto_gzip(source, origin_ns),
        file_name=f"{stem}.perfetto.json.gz",
        mime="application/gzip",
        icon=":material/download:",
        on_click="ignore",
        key="events.export_all",
    )
    cols[1].download_button(
        f"Download this window ({start:.3f}–{end:.3f} ms)",
        data=lambda: perfetto_gzip(source, origin_ns, lo, hi),
        file_name=f"{stem}.{start:.3f}-{end:.3f}ms.perfetto.json.gz",
        mime="application/gzip",
        icon=":material/download:",
        on_click="ignore",
        key="events.export_window",
    )
    if st.button(
        "Open this window in Perfetto",
        icon=":material/open_in_new:",
        key="events.perfetto_prepare",
        help="Builds the window's file here, then a button opens ui.perfetto.dev in a new tab and hands "
        "it the file (the Perfetto UI runs in your browser). Nothing leaves this machine before "
        "you click that second button.",
    ):
        gz = perfetto_gzip(source, origin_ns, lo, hi)
        if len(gz) > perfetto_open.MAX_EMBED_BYTES:
            st.info(
                f"This window's file is {len(gz) / 1024**2:.1f} MiB, more than the "
                f"{perfetto_open.MAX_EMBED_BYTES // 1024**2} MiB handed over in the page: zoom in, or download "
                "it and open the file in Perfetto."
            )
        else:
            perfetto_open.open_button(gz, f"{stem} {start:.3f}-{end:.3f} ms")


def snapshot_view(record: RunRecord) -> None:
    """Memory over time from the snapshot's alloc/free history, then the stacks holding the most at the peak."""
    try:
        with st.spinner("Replaying the snapshot's allocation history…"):
            history = data.snapshot_over_time(record)
    except StepwiseError as err:
        st.error(f"{ui.text(record.label)} cannot be read: {ui.text(err)}")
        return
    if history.curve.empty:
        st.info(
            "This snapshot recorded no allocation history (record_memory_history was off), so there is no "
            "curve over time; the Analysis page shows what its segments hold."
        )
        return
    total = state.device_memory(record.run_id)
    ui.chart(charts_events.snapshot_curve(history, total), key="events.snapshot_curve")
    peak = "unknown" if history.peak_bytes is None else f"{history.peak_bytes / GIB:.2f} GiB"
    st.markdown(
        f"**Peak allocated: {peak}.** The stacks below made the allocations alive at that moment, "
        "largest first (innermost frame first; library frames are marked)."
    )
    for i, s in enumerate(history.top_stacks):
        with st.expander(
            f"{s.bytes / GIB:.2f} GiB in {s.count} allocation(s) — {s.where}", expanded=i == 0
        ):
            st.dataframe(pd.DataFrame({"frame": list(s.frames)}), hide_index=True, width="stretch")
