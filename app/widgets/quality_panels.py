"""The Advisor page's time-to-quality panel: a stored ``optimize --to-quality`` experiment drawn — the metric
against wall-clock time for both arms, the target line, each arm's time to target — with the projection of the
whole run and, given a price per device-hour, its cost."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from advisors.quality.projection import Projection
from app import data
from app.widgets import ui
from cli.optimize_quality import stored_reports
from reports.quality import markdown, round_figure


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
    if wanted in ids and st.session_state.get("quality.linked") != wanted:  # once per link: a pick must stick
        st.session_state["quality.linked"] = wanted
        st.session_state["quality.experiment"] = wanted
    with st.expander("Time to quality (optimize --to-quality)", expanded=wanted in ids):
        chosen = st.selectbox("Experiment", ids, key="quality.experiment")
        path = dict(found)[chosen]
        try:
            out: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            st.warning(f"Its result could not be read back: {ui.text(err)}")
            return
        st.markdown(markdown(out))
        for r in out["rounds"]:
            if r["curves"] or r["early_stopping"]:
                ui.chart(round_figure(out, r["round"]), key=f"quality.{chosen}.{r['round']}")
                st.caption(ui.text(r["reason"], 600))
        projection(out)


def projection(out: dict[str, Any]) -> None:
    proj = out.get("projection")
    if not proj:
        return
    cols = st.columns(3)
    steps = cols[0].number_input("Whole run (steps)", min_value=1, value=int(proj["steps"]),
                                 key="quality.steps")
    price = cols[1].number_input("Price per device-hour", min_value=0.0, value=float(proj["price_per_hour"] or 0.0),
                                 key="quality.price")
    devices = cols[2].number_input("Devices", min_value=1, value=int(proj.get("devices") or 1), key="quality.devices")
    p = Projection(int(steps), float(proj["step_ms"]), proj["ratio"], float(price) if price else None, int(devices))
    st.info(ui.text(p.sentence(), 600))
