"""The Job page's panels: the job's heat maps, straggler, the slowest rank's critical path and collectives, and
opening one rank's trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import data, state
from app.services import uploads
from app.widgets import ui
from profilers.errors import StepwiseError
from profilers.jobs.critical_graph import KIND_WORDS
from profilers.jobs.path_fit import path_fit


MAX_ROWS = 1024  # a heat map row per rank: a thousand ranks still draw as one image


def rank_step_heatmap(job: dict[str, Any], field: str, title: str) -> go.Figure:
    """``job[field]`` (rank × step, ms) as a heat map; the straggler's row marked on the axis."""
    ranks = job["ranks"][:MAX_ROWS]
    culprit = (job.get("straggler") or {}).get("culprit")
    labels = [f"▶ {r}" if r == culprit else str(r) for r in ranks]
    fig = go.Figure(
        go.Heatmap(
            z=job[field][:MAX_ROWS],
            x=[str(s) for s in job["steps"]],
            y=labels,
            colorscale="Viridis",
            colorbar={"title": "ms"},
            hovertemplate="rank %{y}, step %{x}: %{z:.2f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title="step",
        xaxis={"type": "category"},  # step ids, not a number line
        yaxis_title="rank",
        yaxis={"type": "category", "autorange": "reversed"},
        height=max(260, min(900, 160 + 14 * len(ranks))),
        margin={"t": 50},
    )
    return fig


_READS: dict[
    tuple[str, tuple], int
] = {}  # (folder, fingerprint) → times the page's memo actually read it


@st.cache_data(show_spinner=False, max_entries=8)
def _job(folder: str, fingerprint: tuple) -> dict[str, Any]:
    from cli.advisors import analyze

    _READS[(folder, fingerprint)] = _READS.get((folder, fingerprint), 0) + 1
    return analyze(folder)


def _read_job(folder: str, fingerprint: tuple) -> tuple[dict[str, Any], bool]:
    """The job, and whether this look read its ranks (``False``: the page's memo answered for the same files,
    so nothing was read and every summary is the one cached before — the count stored with the answer is the
    first look's, and a second look must not repeat its "0 from the cache")."""
    before = _READS.get((folder, fingerprint), 0)
    result = _job(folder, fingerprint)
    return result, _READS.get((folder, fingerprint), 0) > before


def cache_words(job: dict[str, Any], read_now: bool) -> str:
    """``8 rank summaries, 3 from the cache.`` for a look that read the folder; a look the memo answered read
    nothing: ``8 rank summaries, all 8 from the cache (the files are unchanged since this page read them).``"""
    n = job["summaries"]
    if read_now:
        return f"{n} rank summaries, {job['summaries_cached']} from the cache."
    return f"{n} rank summaries, all {n} from the cache (the files are unchanged since this page read them)."


def _fingerprint(folder: Path) -> tuple:
    from profilers.trace.sources import find_trace_files

    return tuple(
        (f.name, f.path.stat().st_size, f.path.stat().st_mtime_ns)
        for f in find_trace_files(folder)
        if f.path is not None
    )


def job_view(folder: str) -> None:
    p = Path(folder)
    if not p.is_dir():
        st.error(f"{folder}: not a folder on this machine")
        return
    try:
        with st.spinner("Reading each rank's summary…"):
            result, read_now = _read_job(str(p.resolve()), _fingerprint(p))
    except StepwiseError as err:
        st.error(str(err))
        return
    job = result.get("job")
    if job is None:
        st.info("Fewer than two rank files here: open it from the Upload page as one trace.")
        return
    cols = st.columns(4)
    cols[0].metric("Ranks", len(job["ranks"]))
    cols[1].metric("Steps", len(job["steps"]))
    cols[2].metric("Median step", ui.step_time(result["step_time_ms"]))
    cols[3].metric("Bottleneck", result["bottleneck"])
    st.caption(cache_words(job, read_now))
    straggler_panel(job)
    critical_path_panel(job, result["bottleneck"])
    ui.chart(
        rank_step_heatmap(job, "step_ms", "Step time per rank and step"), key="job.step_heatmap"
    )
    ui.chart(
        rank_step_heatmap(job, "exposed_comm_ms", "Exposed communication per rank and step"),
        key="job.comm_heatmap",
    )
    if job["collectives"]:
        st.markdown("**Collectives, most exposed first**")
        st.dataframe(
            pd.DataFrame(
                [
                    {k: c[k] for k in ("name", "count", "total_ms", "exposed_ms")}
                    for c in job["collectives"]
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    sizes = job.get("collective_sizes") or []  # a job cached before sizes were summarised has none
    if sizes:
        st.markdown("**Collectives by kind: what they moved**")
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "kind": c["kind"],
                        "calls": c["calls"],
                        "sized": c["sized_calls"],
                        "GB moved": round(c["bytes"] / 1e9, 3) if c["sized_calls"] else None,
                        "mean message MB": c["mean_message_mb"],
                        "time ms": c["time_ms"],
                        "GB/s (algorithmic)": c["algbw_gb_s"],
                    }
                    for c in sizes
                ]
            ),
            hide_index=True,
            width="stretch",
            placeholder="—",
        )
        if any(c["sized_calls"] < c["calls"] for c in sizes):
            st.caption(
                "A call without a size was recorded without its shapes (profile with record_shapes=True; "
                "torch's older NCCL annotations carry none). Bandwidth is shown only where every call "
                "was sized; it is bytes of each call's first input over the kind's kernel time."
            )
    open_rank(p, job)


def straggler_panel(job: dict[str, Any]) -> None:
    """The straggler and who waits on it, or why no rank is marked: the sentence of :mod:`profilers.jobs.straggler`
    (``job.straggler_reason``), the one the Analysis page's Ranks tab and ``analyze`` say."""
    s = job.get("straggler")
    reason = job.get("straggler_reason") or ""
    if s is None:
        if reason:
            st.info(reason)
        return
    victims = s["victims"]
    st.warning(f"{reason} {len(victims)} rank(s) wait on it in their collectives.")
    if victims:
        st.dataframe(
            pd.DataFrame(victims).rename(columns={"wait_ms": "waits (ms per step)"}),
            hide_index=True,
            width="stretch",
        )
    extra = s.get("extra_work") or {}
    if extra.get("categories"):
        st.markdown(
            f"**Where rank {s['culprit']}'s extra time goes** (ms per step, against the other ranks' median)"
        )
        names = {
            "culprit_ms": f"rank {s['culprit']}",
            "others_median_ms": "others (median)",
            "extra_ms": "extra",
        }
        st.dataframe(
            pd.DataFrame(extra["categories"]).rename(columns=names),
            hide_index=True,
            width="stretch",
        )
        for part, title in (("kernels", "Kernels"), ("ops", "Host operators")):
            if extra.get(part):
                st.caption(f"{title} it spends longest on beyond the others")
                st.dataframe(
                    pd.DataFrame(extra[part]).rename(columns=names),
                    hide_index=True,
                    width="stretch",
                    column_config={"name": st.column_config.TextColumn(width="large")},
                )


def critical_path_bar(cp: dict[str, Any]) -> go.Figure:
    """The critical path's time by kind (ms), one horizontal bar per kind, largest on top."""
    kinds = cp["by_kind"][::-1]
    fig = go.Figure(
        go.Bar(
            x=[k["ms"] for k in kinds],
            y=[KIND_WORDS.get(k["kind"], k["kind"]) for k in kinds],
            orientation="h",
            text=[f"{k['share']:.0%}" for k in kinds],
            textposition="auto",
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Rank {cp['rank']}'s critical path, step {cp['step']}: {cp['total_ms']:.2f} ms",
        xaxis_title="ms on the path",
        height=120 + 28 * len(kinds),
        margin={"t": 50},
        yaxis={"automargin": True},
    )  # a kind's words whole, not cut at the left edge
    return fig


def critical_path_panel(job: dict[str, Any], bottleneck: str | None = None) -> None:
    """The critical path of the rank of most work (``job.critical_path``): its time by kind and its longest items,
    and how it fits the job's ``bottleneck`` where the two seem to disagree (:func:`path_fit`)."""
    cp = job.get("critical_path")  # a job cached before critical paths were summarised has none
    if not cp:
        return
    if not cp["available"]:
        extra = (
            " Its extra work above is read from the summaries alone."
            if job.get("straggler")
            else ""
        )
        st.info(f"Critical path of rank {cp['rank']}: {cp['reason']}.{extra}")
        return
    ui.chart(critical_path_bar(cp), key="job.critical_path")
    st.caption(
        "The chain of dependent work that sets this rank's step: host operators, launches, kernels and "
        "the waits between them; every kind's time adds up to the step."
    )
    fit = path_fit(job, bottleneck)
    if fit:
        st.info(fit)
    if cp["top"]:
        top = pd.DataFrame(cp["top"]).assign(
            kind=lambda d: [KIND_WORDS.get(k, k) for k in d["kind"]]
        )
        st.dataframe(
            top,
            hide_index=True,
            width="stretch",
            column_config={"name": st.column_config.TextColumn(width="large")},
        )


def open_rank(folder: Path, job: dict[str, Any]) -> None:
    """Import one rank's file as a run of its own, then show it on the Analysis page (its events and Perfetto
    export are on the Events page): only that rank's events are loaded."""
    from profilers.trace.sources import find_trace_files

    files = {f.name: f for f in find_trace_files(folder) if f.path is not None}
    by_rank = {r: files[name] for r, name in zip(job["ranks"], job["files"]) if name in files}
    if not by_rank:
        return
    default = (job.get("straggler") or {}).get(
        "culprit", (job.get("critical_path") or {}).get("rank")
    )
    default = default if default in by_rank else next(iter(by_rank))
    rank = st.selectbox(
        "Open one rank's trace",
        list(by_rank),
        index=list(by_rank).index(default),
        format_func=lambda r: f"rank {r} · {by_rank[r].name}",
        key="job.rank",
    )
    if st.button("Open this rank", key="job.open"):
        f = by_rank[rank]
        assert f.path is not None
        # the upload's door: analysed, stored with its figures (the Runs list's ms/step), never stored twice
        outcome = uploads.store_file(
            data.store(), f.path, f"{folder.name} rank {rank}", data.checked_upload
        )
        if not outcome.ok or outcome.run_id is None:
            st.error(uploads.describe(outcome))
            return
        state.select_run(outcome.run_id)
        st.switch_page("views/analysis.py")


def watched_ranks_panel(run_id: str) -> None:
    """A watched run's ranks over the whole run (``stepwise watch -- torchrun …``): each rank's step time and own
    work per step, its captures shaded."""
    from profilers.run.rank_timeline import rank_timeline, reduce_ranks
    from reports.charts.ranks import ranks_over_time

    store = data.store()
    try:
        run_dir = store.path(run_id)
    except StepwiseError as err:
        st.error(str(err))
        return
    if not (run_dir / "steps.jsonl").is_file():
        st.error(f"{run_id}: no steps recorded (not a launched or watched run)")
        return
    steps, captures = rank_timeline(run_dir)
    if steps["rank"].nunique() < 2:
        st.info(f"{run_id} has one rank: its steps are on its own page.")
    reduced = reduce_ranks(run_dir)
    if (
        reduced is not None
    ):  # the ranks over the whole run, judged by the one straggler rule (watch --json: ranks)
        (st.warning if reduced.straggler_rank is not None else st.info)(
            f"Over the whole run: {reduced.reason}"
        )
        st.dataframe(
            pd.DataFrame([r.__dict__ for r in reduced.ranks]).rename(
                columns={
                    "median_step_ms": "median ms/step",
                    "median_work_ms": "median own work ms",
                    "samples_per_s": "samples/s",
                }
            ),
            hide_index=True,
            key="job.watched_ranks",
        )
    ui.chart(ranks_over_time(steps, captures), key="job.ranks_over_time")
    behind = [c for c in captures if (c.get("trigger") or {}).get("kind") == "rank_behind"]
    for c in behind:
        st.caption(f"Steps {c['steps'][0]:,}–{c['steps'][1]:,}: {c['trigger']['reason']}")
