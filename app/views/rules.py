"""Rules: what the advisor checks — each rule's documentation, thresholds, proposed fix and its examples."""

from __future__ import annotations

import streamlit as st

from app.widgets import ui
from reports import advice

st.title("Rules")
docs = advice.rule_docs()
st.caption(
    f"{len(docs)} rules, in the order that breaks ties between equally severe findings. Severity is always "
    "the share of step time at stake, so findings of different kinds compare on one scale."
)
classes = list(dict.fromkeys(d["bottleneck"] for d in docs))
for tab, cls in zip(st.tabs([c.capitalize() for c in classes]), classes):
    with tab:
        for d in (d for d in docs if d["bottleneck"] == cls):
            with st.expander(f"{d['id']} · {d['name']}"):
                st.markdown(d["doc"])
                if d.get("cause"):
                    st.caption(
                        f"Looks at: {ui.text(advice.cause_text(d['cause']))} — rules that look at the same "
                        "time are one finding, and claim it once."
                    )
                if d["thresholds"]:
                    st.dataframe(
                        [{"threshold": k, "value": v} for k, v in d["thresholds"].items()],
                        hide_index=True,
                    )
                fix = advice.fix_for(d["fix"])
                if fix is not None:
                    st.markdown(f"**Fix: {ui.text(fix.title)}.** {ui.text(fix.explanation)}")
                    st.code(fix.snippet, language="python")
                st.caption(
                    f"Fires on: {ui.text(', '.join(d['fires']) or '—')} · passes: "
                    f"{ui.text(', '.join(d['passes']) or '—')}"
                )
