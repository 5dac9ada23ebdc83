"""Compare: any two runs or traces side by side — the regression verdict, step time, breakdown deltas, kernels and
ops that moved, and the comparison as HTML/JSON/Markdown."""

from __future__ import annotations

import streamlit as st

from app import data

from app.widgets import compare_panels, url_state

from app.services import tables

from app.widgets import ui
from advisors.compare.environment import environment_json
from reports.charts import compare as charts_compare
from reports.compare import compare

st.title("Compare")
records = data.analysable_runs(
    (st.query_params.get(url_state.A_PARAM), st.query_params.get(url_state.B_PARAM))
)
if len(records) < 2:
    st.info("Compare needs two runs or uploaded traces.")
    st.page_link("views/upload.py", label="Upload a trace", icon=":material/upload:")
    st.stop()
a, b = url_state.compare_pickers(records)
if a is None or b is None:
    st.info(
        "Pick the two runs or traces to compare: A (before) and B (after). Nothing is judged until you do."
    )
    st.stop()
if a.run_id == b.run_id:
    st.info("Pick two different runs.")
    st.stop()
ta, tb = ui.load_analysis(a), ui.load_analysis(b)
if ta is None or tb is None:
    st.stop()
c = compare(ta, tb)
env = c.environment
if env.note is not None:  # first: a verdict between two machines is not about the code
    st.warning(env.note, icon=":material/devices:")
with st.expander("Environments of A and B", expanded=False):
    st.dataframe(tables.environment_table(environment_json(env)), hide_index=True, width="stretch")
cols = st.columns(3)
for col, name, ms in ((cols[0], "A", c.step_ms_a), (cols[1], "B", c.step_ms_b)):
    col.metric(
        f"{name} time per step",
        tables.per_step_label(ms),
        help="Elapsed time of the measured steps over their count: the speed every verdict reads.",
    )
    if typical := tables.typical_label(ms):
        col.caption(typical.capitalize() + ".")
check = compare_panels.verdict(ta, tb, c)
if c.speedup:  # coloured only when the verdict below decided: a red "−33%" above "Inconclusive" contradicted it
    decided = check is not None and check.verdict in ("regression", "improvement")
    cols[2].metric(
        "Speed-up of B",
        f"{c.speedup:.2f}×",
        delta=f"{(c.speedup - 1):+.0%}"
        + ("" if decided else f" ({check.verdict if check else 'no verdict'})"),
        delta_color="normal" if decided else "off",
    )
ui.chart(
    charts_compare.step_time_distributions(
        {f"A: {c.label_a}": c.step_ms_a, f"B: {c.label_b}": c.step_ms_b}, "Step time, A vs B"
    ),
    key="compare.steps",
)
side = {
    "A (before)": dict(zip(c.categories["category"], c.categories["a_ms"])),
    "B (after)": dict(zip(c.categories["category"], c.categories["b_ms"])),
}  # short: the pickers name them
l2, r2 = st.columns(2)
with l2:
    ui.chart(charts_compare.breakdown_side_by_side(side), key="compare.breakdown")
with r2:
    ui.chart(charts_compare.category_deltas(c.categories), key="compare.deltas")
losses = (
    {f"A: {c.label_a}": ta.run.losses, f"B: {c.label_b}": tb.run.losses}
    if ta.run and tb.run
    else {}
)
if any(losses.values()):
    ui.chart(charts_compare.loss_curves(losses), key="compare.loss")
# Full width, one under the other: side by side, the long kernel names left the numbers cut off on the right
# and the bars' axis squeezed.
for table, title, key in (
    (c.kernels, "Kernels that moved most", "compare.kernels"),
    (c.ops, "Operators that moved most", "compare.ops"),
):
    if len(table):
        ui.chart(charts_compare.name_deltas(table, title), key=key)
        st.dataframe(
            compare_panels.deltas_frame(table),
            hide_index=True,
            width="stretch",
            height=280,
            column_config=compare_panels.DELTA_COLUMNS,
        )
