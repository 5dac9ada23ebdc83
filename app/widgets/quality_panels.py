"""The Advisor page's time-to-quality panel: a stored ``optimize --to-quality`` experiment — its one stored record
(:class:`~advisors.experiments.results.quality_record.QualityRecord`: target, verdicts, predicted and measured
parts, early stopping's trade-off line) rendered as the report renders it, each round's curves drawn — the metric
against wall-clock time for both arms, the target line, each arm's time to target — with the projection of the
whole run and, given a price per device-hour, its cost."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from advisors.experiments.results.stored_view import read_view
from advisors.quality.projection import Projection
from app import data
from profilers.store import experiments
from app.widgets import ui
from cli.optimize_quality import stored_reports
from reports.quality import markdown, round_figure, tradeoff_figure


LINK_PARAM = "quality"  # ``/advisor?quality=<experiment id>``: the Runs page's link to one of them


def linked() -> str | None:
    """The time-to-quality experiment the address names (the Runs page links here with it)."""
    return st.query_params.get(LINK_PARAM) or None


def render() -> None:
    found = stored_reports(data.store())
    if not found:
        return
    ids = [exp_id for exp_id, _ in found]
    wanted = linked()
    if (
        wanted in ids and st.session_state.get("quality.linked") != wanted
    ):  # once per link: a pick must stick
        st.session_state["quality.linked"] = wanted
        st.session_state["quality.experiment"] = wanted
    with st.expander("Time to quality (optimize --to-quality)", expanded=wanted in ids):
        chosen = st.selectbox("Experiment", ids, key="quality.experiment")
        seen = read_view(experiments.view(data.store(), chosen))
        try:
            out: dict[str, Any] = json.loads(dict(found)[chosen].read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            st.warning(f"Its result could not be read back: {ui.text(err)}")
            return
        if seen is None or seen.quality is None:
            st.warning(
                "Its stored record could not be read back (an experiment stored before the record was kept)."
            )
            return
        st.markdown(markdown(seen.quality))  # the one stored record, as the reports render it
        curves = {r["round"]: r for r in out["rounds"]}
        for r in seen.quality.rounds:
            drawn = curves.get(r.round) or {}
            if drawn.get("curves") or drawn.get("early_stopping"):
                ui.chart(round_figure(out, r.round), key=f"quality.{chosen}.{r.round}")
                st.caption(ui.text(r.reason, 600))
            trade = tradeoff_figure(drawn) if drawn else None
            if trade is not None:
                ui.chart(trade, key=f"quality.{chosen}.{r.round}.tradeoff")
        projection(out, seen.quality.projection)


def run_noise_panel(run_dir: str | None) -> None:
    """Analysis: the run's gradient noise scale, when it carried the meter (every ``--to-quality`` arm does): the
    critical batch, the current statistical efficiency and — when a stored time-to-quality experiment probed its
    step time per batch — the goodput-best batch."""
    if not run_dir:
        return
    from advisors.quality.noise_scale import for_run

    ns = for_run(run_dir)
    if ns is None:
        return
    cols = st.columns(4)
    iv = (
        f" [{ns.interval[0]:.3g}, {ns.interval[1]:.3g}]" if ns.interval else ""
    )  # inf prints as inf
    cols[0].metric(
        "Gradient noise scale B_simple",
        "—" if ns.b_simple is None else f"{ns.b_simple:.3g}",
        help=f"{ns.level:.0%} interval{iv}; {ns.steps} steps at batch {ns.batch}; meter overhead "
        f"{ns.overhead:.1%}",
    )
    cols[1].metric(
        "Critical batch (≈ B_noise)", "—" if ns.b_simple is None else f"{ns.b_simple:.3g}"
    )
    eff = ns.b_simple / (ns.b_simple + ns.batch) if ns.b_simple else None
    cols[2].metric(
        "Statistical efficiency now",
        "—" if eff is None else f"{eff:.0%}",
        help="progress per sample at this batch relative to a very small one: B_noise / (B_noise + B)",
    )
    best = goodput_best_for(run_dir)
    cols[3].metric(
        "Goodput-best batch",
        "—" if best is None else str(best),
        help="from optimize --to-quality's throughput probe (step time per batch); — when none probed",
    )


def goodput_best_for(run_dir: str) -> int | None:
    """The goodput-best batch a stored time-to-quality experiment found for the baseline this run belongs to."""
    for _, path in stored_reports(data.store()):
        try:
            out = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if any(c.get("run_dir") == run_dir for c in out.get("baseline", {}).get("curves", [])):
            plan = (out.get("noise_scale") or {}).get("plan") or {}
            best = plan.get("goodput_best_batch")
            return int(best) if isinstance(best, int) else None
    return None


def projection(out: dict[str, Any], stored: str | None) -> None:
    """The whole run's projection: the record's own sentence (``stored``) until the user changes the run's
    length, the price or the devices, then that what-if."""
    proj = out.get("projection")
    if not proj:
        return
    cols = st.columns(3)
    steps = cols[0].number_input(
        "Whole run (steps)", min_value=1, value=int(proj["steps"]), key="quality.steps"
    )
    price = cols[1].number_input(
        "Price per device-hour",
        min_value=0.0,
        value=float(proj["price_per_hour"] or 0.0),
        key="quality.price",
    )
    devices = cols[2].number_input(
        "Devices", min_value=1, value=int(proj.get("devices") or 1), key="quality.devices"
    )
    asked = (int(steps), float(price) if price else None, int(devices))
    if stored is not None and asked == (
        int(proj["steps"]),
        proj["price_per_hour"] or None,
        int(proj.get("devices") or 1),
    ):
        st.info(ui.text(stored, 600))
        return
    p = Projection(asked[0], float(proj["step_ms"]), proj["ratio"], asked[1], asked[2])
    st.info(ui.text(p.sentence(), 600))
