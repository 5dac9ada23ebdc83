"""Launch: placeholder while it is built."""

from __future__ import annotations

import streamlit as st

st.title("Launch")
st.info("Coming in the next commit.")
