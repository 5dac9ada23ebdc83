"""The panels of the Analysis page, one function each; they render an :class:`Analysis` and compute nothing."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from advisors.analysis import Analysis
from app import state

from app.services import tables

from app.widgets import ui, url_state
from profilers.efficiency.peaks import PEAK_NAMES
from profilers.jobs.agent_summaries import is_run_views
from profilers.run.captures import trigger_sentence
from profilers.trace.memory_snapshot import GIB
from reports import charts
from reports.charts import over_time as charts_time


_NUMBERS = {
    "total ms": st.column_config.NumberColumn(format="%.2f", width="small"),
    "ms/step": st.column_config.NumberColumn(format="%.3f", width="small"),
    "calls": st.column_config.NumberColumn(format="%d", width="small"),
    "mean µs": st.column_config.NumberColumn(format="%.1f", width="small"),
}
#: Full-width tables whose name column takes the room and whose numbers stay narrow (nothing cut off).
KERNEL_COLUMNS = {
    "kernel": st.column_config.TextColumn(width="large"),
    "class": st.column_config.TextColumn(width="small"),
    "low precision": st.column_config.CheckboxColumn(width="small"),
    **_NUMBERS,
}
OP_COLUMNS = {"operator": st.column_config.TextColumn(width="large"), **_NUMBERS}
#: The per-rank table in words, not its frame's keys ("step_ms", "exposed_comm_ms").
RANK_COLUMNS = {
    "step_ms": st.column_config.NumberColumn("median step (ms)", format="%.3f"),
    "work_ms": st.column_config.NumberColumn("work (ms)", format="%.3f"),
    "exposed_comm_ms": st.column_config.NumberColumn("exposed communication (ms)", format="%.3f"),
}
NO_KERNELS_CPU = "No GPU kernels: this run's steps ran on the CPU. Its host operators below are where the time went."
NO_KERNELS = "No GPU kernels in this trace: its host operators are below."


def headline(a: Analysis) -> None:
    """The one sentence, then the key figures."""
    b = a.breakdown
    d = a.diagnosis
    if d is not None and d.binding is not None:
        st.subheader(f"Binding bottleneck: {d.bottleneck.value}")
        st.markdown(f"{ui.text(d.binding.message)} _(confidence {d.confidence:.0%})_")
    else:
        st.markdown(ui.text(a.headline))
        if a.advisor_note:
            st.caption(ui.text(a.advisor_note))
    trigger = a.run.trigger if a.run is not None else None
    if trigger is not None:  # a watched run's capture: the rule that made it and the rise it saw
        st.caption(ui.text(trigger_sentence(trigger)))
    if b is None:
        return
    cols = st.columns([2.4, 1, 1, 1, 1])  # a device's name is long: its column is the widest
    name, _, basis = b.device_label.partition(" (")
    cols[0].metric(
        "Device", name, help=b.gpu_arch.basis if b.gpu_arch is not None else b.device_name
    )
    if (
        basis
    ):  # "inferred from kernel names", "peak unknown": said in full under the name, never cut off
        cols[0].caption(f"({basis}")
    traced = (
        f"{len(b.ranks)} of the {a.n_ranks} ranks kept a full trace: the breakdown is of those; the Ranks "
        "tab reads every rank's summary"
        if a.n_ranks > len(b.ranks)
        else None
    )
    cols[1].metric("Ranks × steps", f"{a.n_ranks} × {b.n_steps}", help=traced)
    # a run's time per step; a trace's median
    timed = a.run is not None and a.run.step_time_ms is not None
    cols[2].metric(
        "Time per step" if timed else "Median step",
        ui.step_time(a.step_time_ms),
        help=ui.step_time_help(a),
    )
    cols[3].metric("GPU busy", f"{b.gpu_busy_share:.0%}" if b.device == "gpu" else "—")
    if not a.summarised_ranks:
        cols[4].metric("Events", f"{a.n_events:,}")
    else:  # read from its ranks' summaries: no event was loaded, and "0 events" would say none were recorded
        cols[4].metric("Events", "per rank", help=a.notes[0] if a.notes else None)
    if a.needs_gpu_model:  # MFU needs a peak: the trace does not name a model the table knows
        model = url_state.gpu_model_picker(
            PEAK_NAMES, b.gpu_arch.name if b.gpu_arch is not None else None
        )
        eff = a.efficiency_for(model)
        if eff is not None:
            st.caption(ui.text(eff.phrase()))
    elif d is not None and isinstance(
        d.evidence.get("efficiency"), str
    ):  # MFU against the device's peak
        st.caption(ui.text(str(d.evidence["efficiency"])))
    ui.chart(charts.share_bar(b.shares()), key="analysis.share")


def notes(a: Analysis) -> None:
    items = [*a.notes, *a.warnings]
    if items:
        with st.expander(f"Notes and warnings ({len(items)})"):
            for item in items:
                st.markdown(f"- {ui.text(item, 500)}")


def breakdown_panel(a: Analysis) -> None:
    b = a.breakdown
    assert b is not None
    rank = None
    if len(b.ranks) > 1:
        rank = st.selectbox(
            "Rank",
            [None, *b.ranks],
            key="analysis.rank_breakdown",
            format_func=lambda r: "mean over ranks" if r is None else str(r),
        )
    ui.chart(charts.step_breakdown(b.per_step, rank), key="analysis.per_step")
    if len(b.ranks) > 1:
        ui.chart(charts.rank_breakdown(b.per_step), key="analysis.per_rank")


def timeline_panel(a: Analysis) -> None:
    if a.summarised_ranks:
        st.info(
            "No timeline here: this job was "
            + ui.text(a.notes[0] if a.notes else "read as summaries")
            + ".",
            icon=":material/grid_view:",
        )
        return
    if a.timeline.empty:
        st.info("No timeline: the trace has no steps.")
        return
    ranks = sorted(a.timeline["rank"].unique().tolist())
    rank = st.selectbox("Rank", ranks, key="analysis.rank_timeline") if len(ranks) > 1 else ranks[0]
    ui.chart(charts_time.timeline(a.timeline, a.step_spans, int(rank)), key="analysis.timeline")
    st.caption(
        f"{a.n_events:,} events summarised into {len(a.timeline):,} time buckets; the raw trace stays "
        "on the server."
    )
    st.page_link(
        "views/events.py",
        label="Zoom into any window, see single events, export for Perfetto",
        icon=":material/timeline:",
    )


def tables_panel(a: Analysis) -> None:
    b = a.breakdown
    assert b is not None
    rows = max(len(b.per_step), 1)
    query = st.text_input(
        "Filter names", key="analysis.filter", placeholder="e.g. gemm, conv, aten::add"
    )
    kernels, ops = b.kernels, b.ops
    if query:
        kernels = kernels[kernels["name"].str.contains(query, case=False, regex=False)]
        ops = ops[ops["name"].str.contains(query, case=False, regex=False)]
    if len(b.kernels):
        ui.chart(
            charts.top_items(kernels, "Top GPU kernels", color_by="kclass"),
            key="analysis.top_kernels",
        )
        st.caption(
            "One bar per kernel; hover a bar for its full name. Long names keep their start and end."
        )
        st.dataframe(
            tables.kernels_frame(kernels, rows),
            hide_index=True,
            width="stretch",
            height=320,
            column_config=KERNEL_COLUMNS,
        )
    else:  # not an empty GPU-kernel table with "empty" in it: say why there is none
        st.caption(NO_KERNELS_CPU if b.device == "cpu" else NO_KERNELS)
    ui.chart(charts.top_items(ops, "Top host operators (inclusive)"), key="analysis.top_ops")
    st.dataframe(
        tables.ops_frame(ops, rows),
        hide_index=True,
        width="stretch",
        height=320,
        column_config=OP_COLUMNS,
    )


def telemetry_panel(a: Analysis) -> None:
    b = a.breakdown
    if not a.telemetry.empty:
        source = a.run.telemetry_source if a.run else None
        ui.chart(charts_time.telemetry(a.telemetry, a.steps, source), key="analysis.telemetry")
        if source == "host":
            st.caption(
                "Host telemetry (psutil) was recorded because NVML was unavailable on the machine that ran it."
            )
        if a.run is not None and a.run.telemetry is not None:
            st.caption("During the steady steps: " + a.run.telemetry.describe() + ".")
    elif a.run is not None:
        st.info("This run recorded no telemetry.")
    if not a.memory.empty:
        ranks = sorted(a.memory["rank"].unique().tolist())
        rank = (
            st.selectbox("Rank", ranks, key="analysis.rank_memory") if len(ranks) > 1 else ranks[0]
        )
        ui.chart(
            charts_time.memory_over_time(a.memory, a.step_spans, int(rank)),
            key="analysis.memory_time",
        )
    peaks, capacity = _peaks(a)
    if any(v is not None for v in peaks.values()):
        ui.chart(
            charts.memory_peak(peaks, capacity, "Memory peak against capacity"),
            key="analysis.memory_peak",
        )
    if b is not None and a.memory.empty:
        st.info(
            "No memory events in this trace (the profiler ran with profile_memory off), so there is no "
            "memory curve over time."
        )


def _peaks(a: Analysis) -> tuple[dict[str, float | None], float | None]:
    mib = 1024**2
    peaks: dict[str, float | None] = {}
    capacity = None
    if a.breakdown is not None:
        m = a.breakdown.memory
        peaks["device allocated"] = (
            m.device_allocated_bytes / mib if m.device_allocated_bytes else None
        )
        peaks["device reserved"] = (
            m.device_reserved_bytes / mib if m.device_reserved_bytes else None
        )
        peaks["host allocated"] = m.host_allocated_bytes / mib if m.host_allocated_bytes else None
        capacity = m.device_capacity_bytes / mib if m.device_capacity_bytes else None
    if a.run is not None:
        peaks["run peak (telemetry)"] = a.run.peak_memory_mb
        capacity = capacity or a.run.memory_budget_mb
    return peaks, capacity


def ranks_panel(a: Analysis) -> None:
    b = a.breakdown
    assert b is not None
    if is_run_views(a.job):  # every rank wrote a summary; only some kept a trace
        run_ranks_panel(
            a.job, len(b.ranks), a.diagnosis.bottleneck.value if a.diagnosis is not None else None
        )
        return
    if len(b.ranks) < 2:
        st.info(b.straggler_call.reason)
        return
    call = b.straggler_call  # the one rule (profilers.jobs.straggler): the Job page says the same
    ui.chart(
        charts.straggler(b.per_rank, call.rank if call.marked else None), key="analysis.straggler"
    )
    (st.warning if call.marked else st.caption)(call.reason)  # our own sentence: numbers only
    st.dataframe(b.per_rank, hide_index=True, width="stretch", column_config=RANK_COLUMNS)


def run_ranks_panel(
    job: dict[str, Any], traced_in_breakdown: int, bottleneck: str | None = None
) -> None:
    """A run launched with ``--trace-ranks``: all N ranks from the summaries they wrote at capture time (step
    and collective time per rank and step, the straggler, its critical path when its trace was kept), where the
    other tabs show only the ranks that kept a trace."""
    from app.widgets.job_panels import critical_path_panel, rank_step_heatmap, straggler_panel

    ranks, traced = job["ranks"], job["traced_ranks"]
    cols = st.columns(3)
    cols[0].metric("Ranks", len(ranks), help="ranks that wrote a per-step summary at capture time")
    cols[1].metric("With a trace", len(traced), help="ranks that kept their full profiler trace")
    cols[2].metric("Steps", len(job["steps"]))
    shown = (
        (f"rank{'s' if len(traced) != 1 else ''} " + ", ".join(map(str, traced)))
        if traced
        else "no rank"
    )
    st.caption(
        f"Every rank wrote a summary of its steps while it trained; {shown} kept a full trace. "
        f"This tab reads all {len(ranks)} ranks; the other tabs show the {traced_in_breakdown} traced "
        "rank(s) alone."
    )
    straggler_panel(job)
    critical_path_panel(job, bottleneck)
    ui.chart(
        rank_step_heatmap(job, "step_ms", "Step time per rank and step"),
        key="analysis.rank_step_heatmap",
    )
    ui.chart(
        rank_step_heatmap(
            job, "comm_ms", "Collective time per rank and step (a waiting rank's is long)"
        ),
        key="analysis.rank_comm_heatmap",
    )
    st.dataframe(
        pd.DataFrame(job["per_rank"]),
        hide_index=True,
        width="stretch",
        column_config={
            **RANK_COLUMNS,
            "comm_ms": st.column_config.NumberColumn("collective time (ms)", format="%.3f"),
        },
    )


def snapshot_panel(a: Analysis, run_id: str) -> None:
    """A memory snapshot: the device total (asked: snapshots do not record it), peak vs reserved vs capacity,
    and where the memory alive at the peak was allocated."""
    s = a.snapshot
    assert s is not None
    gib = GIB
    stated = (a.device_memory_bytes or 0) / gib
    total = st.number_input(
        "Device total memory (GiB), to judge capacity — 0 if unknown",
        min_value=0.0,
        max_value=4096.0,
        value=float(stated),
        step=1.0,
        key=f"analysis.device_gib.{run_id}",
    )
    if abs(total - stated) > 1e-9:
        state.set_device_memory(run_id, int(total * gib) if total > 0 else None)
        st.rerun()
    cols = st.columns(4)
    cols[0].metric(
        "Peak live",
        "—" if s.peak_allocated_bytes is None else f"{s.peak_allocated_bytes / gib:.2f} GiB",
    )
    cols[1].metric(
        "Reserved", f"{s.reserved_bytes / gib:.2f} GiB", help=f"{s.segments} allocator segments"
    )
    cols[2].metric("Device total", f"{stated:.0f} GiB" if stated else "unknown")
    cols[3].metric("Out-of-memory events", s.oom_events)
    ui.chart(charts.snapshot_memory(s, a.device_memory_bytes), key="analysis.snapshot_peak")
    st.markdown("**Largest allocations alive at the peak**")
    st.dataframe(tables.snapshot_sites_frame(s), hide_index=True, width="stretch")
    st.caption(
        f"{s.history_events:,} allocator events replayed; read by an unpickler that refuses every class."
    )
    st.page_link(
        "views/events.py",
        label="Memory over time and the stacks of the top allocation sites",
        icon=":material/timeline:",
    )
