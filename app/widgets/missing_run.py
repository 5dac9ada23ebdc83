"""The page a link naming an unknown or deleted run gets: says so, offers a way back, shows no other run.

A stale bookmark, a run deleted in another tab or a link from another machine's store must never open whatever
run happens to be selected: the page stops here (``app/main.py`` calls :func:`render` before any page draws).
"""

from __future__ import annotations

import streamlit as st

from reports.escape import markdown_text


def render(run_id: str, what: str = "run") -> None:
    """The "no such run" page for ``run_id`` (``what``: which of the link's runs it is, e.g. "run A")."""
    st.title("No such run")
    st.error(
        f"The link names {what} `{markdown_text(run_id, 80)}`, which is not in this run store: it was deleted, "
        "or the link comes from another machine's store. Nothing else is shown in its place.",
        icon=":material/link_off:",
    )
    cols = st.columns(3)
    cols[0].page_link("views/runs.py", label="Back to the run list", icon=":material/list:")
    cols[1].page_link("views/upload.py", label="Upload a trace", icon=":material/upload:")
    cols[2].page_link("views/launch.py", label="Launch a run", icon=":material/play_arrow:")
