"""Stepwise dashboard entry: ``streamlit run app/main.py`` (what ``bash scripts/dashboard.sh`` runs).

A thin script: page config, the shared sidebar, ``st.navigation``. Every page lives in ``app/views/`` and
only renders what the packages compute. "The dashboard walk" in comments and tests is the new-user walk of
benchmarks/results/dashboard-walk-2026-11-25.md (each problem it found, its fix and its test).
"""

from __future__ import annotations

import streamlit as st

from pathlib import Path

from app.widgets import links, sidebar

# A local icon file: a ":material/…:" page icon makes the browser fetch the favicon from fonts.gstatic.com, a
# request that leaves the machine (and fails on a training box without internet).
st.set_page_config(
    page_title="Stepwise", page_icon=str(Path(__file__).with_name("icon.png")), layout="wide"
)

PAGES = {
    "": [st.Page("views/home.py", title="Home", icon=":material/home:", default=True)],
    "Runs": [
        st.Page("views/runs.py", title="Runs", icon=":material/list:", url_path="runs"),
        st.Page("views/launch.py", title="Launch", icon=":material/play_arrow:"),
        st.Page("views/upload.py", title="Upload", icon=":material/upload:"),
    ],
    "Understand": [
        st.Page("views/analysis.py", title="Analysis", icon=":material/bar_chart:"),
        st.Page("views/events.py", title="Events", icon=":material/timeline:"),
        st.Page("views/job.py", title="Job", icon=":material/grid_on:"),
        st.Page("views/advisor.py", title="Advisor", icon=":material/lightbulb:"),
        st.Page("views/compare.py", title="Compare", icon=":material/compare_arrows:"),
    ],
    "Share": [
        st.Page("views/report.py", title="Report", icon=":material/description:"),
        st.Page("views/rules.py", title="Rules", icon=":material/rule:"),
    ],
}

navigation = st.navigation(PAGES)
sidebar.render()
links.follow()  # ``?run=<id>`` on any page selects that run before the page draws (an unknown id: "no such run")
navigation.run()
