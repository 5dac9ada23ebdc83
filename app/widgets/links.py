"""Deep links: the URL's ``?run=<id>`` is the selected run, both ways.

:func:`follow` (called by ``app/main.py`` before a page runs) makes a run named in the URL the session's
selected run, once per new link, so ``/analysis?run=<id>`` opens that run. :func:`show` writes the run a page
shows back into the URL, so a reload or a copied address opens the same run.
"""

from __future__ import annotations

import streamlit as st

from app import data, state
from app.widgets import missing_run
from profilers.errors import RunError

RUN_PARAM = "run"
FOLLOW_PARAM = (
    "follow"  # the run the Launch page follows live (a reload of that page re-attaches to it)
)


def linked_run() -> str | None:
    """The run id the URL names, when it names a stored run (a stale or foreign id is ignored)."""
    run_id = st.query_params.get(RUN_PARAM)
    if not run_id:
        return None
    try:
        data.store().get(run_id)
    except RunError:
        return None
    return run_id


def exists(run_id: str) -> bool:
    try:
        data.store().get(run_id)
    except RunError:
        return False
    return True


def follow() -> None:
    """Select the URL's run when the link is new to this session (not on every rerun: a pick must stick).

    A link naming no stored run gets the "no such run" page and the page stops: never another run in its place."""
    named = st.query_params.get(RUN_PARAM)
    if named and not exists(named):
        missing_run.render(named)
        st.stop()
    run_id = linked_run()
    if run_id is not None and run_id != state.followed_link():
        state.set_followed_link(run_id)
        state.select_run(run_id)


def show(run_id: str | None) -> None:
    """Put the shown run in the URL (no rerun: Streamlit updates the address bar only)."""
    if run_id is None:
        st.query_params.pop(RUN_PARAM, None)
    elif st.query_params.get(RUN_PARAM) != run_id:
        st.query_params[RUN_PARAM] = run_id
        state.set_followed_link(run_id)


def followed() -> str | None:
    """The run the URL says the Launch page follows (``?follow=<id>``), unchecked."""
    return st.query_params.get(FOLLOW_PARAM) or None


def show_followed(run_id: str) -> None:
    if st.query_params.get(FOLLOW_PARAM) != run_id:
        st.query_params[FOLLOW_PARAM] = run_id
