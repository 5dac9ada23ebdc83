"""The root URL: hands over to the Runs page at ``/runs``, keeping the query (``/?run=<id>`` → ``/runs?run=<id>``).

Every page then has a path of its own (``/runs``, ``/analysis``, …), so a link to any of them works."""

from __future__ import annotations

import streamlit as st

st.switch_page("views/runs.py", query_params=st.query_params.to_dict())
