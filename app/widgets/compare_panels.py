"""The Compare page's verdict: the regression gate's call on A → B, what moved, and the comparison exports.

The same verdict as ``python -m advisors compare A B`` (A is BASE, B is NEW), from the analyses the page
has loaded already; nothing here judges, it only renders :class:`advisors.compare.regression.RegressionCheck`.
"""

from __future__ import annotations

import re
from functools import partial

import pandas as pd
import streamlit as st

from advisors.compare.regression import DEFAULT_MAX_SLOWDOWN, RegressionCheck
from app.widgets import ui
from profilers.errors import StepwiseError
from reports import export
from advisors.analysis import Analysis
from reports.compare import Comparison, regression_check
from reports.content.compare import ranks_line

BOXES = {
    "regression": st.error,
    "improvement": st.success,
    "same": st.info,
    "inconclusive": st.warning,
}
WORDS = {"inconclusive": "Inconclusive — neither slower nor the same can be told from these runs"}
KINDS = (("category", "categories"), ("kernel", "kernels"), ("operator", "operators"))


def verdict(a: Analysis, b: Analysis, tables: Comparison) -> RegressionCheck | None:
    """Tolerance input, the verdict box, the bottleneck before → after, the movers and the downloads."""
    pct = st.number_input(
        "Tolerated slowdown (%)",
        min_value=0.0,
        max_value=100.0,
        step=1.0,
        value=100 * DEFAULT_MAX_SLOWDOWN,
        key="compare.max_slowdown",
        help="B is a regression only when its time per step is longer than A's by more than this "
        "*and* beyond the noise between steps (95% bootstrap interval).",
    )
    try:
        c = regression_check(a, b, pct / 100)
    except StepwiseError as err:
        st.warning(f"No verdict: {ui.text(err)}")
        return None
    reason = as_a_b(c.reason)
    interval = (
        ""
        if c.estimate is None or "interval" in reason
        else f" · 95% interval {c.estimate.low:.3f}–{c.estimate.high:.3f}"
    )  # said once: the reason may state it
    word = WORDS.get(c.verdict, c.verdict.capitalize())
    BOXES[c.verdict](f"**{word}** (ratio B / A {c.ratio:.3f}{interval}) — {ui.text(reason)}")
    st.markdown(f"Binding bottleneck: **{c.base.bottleneck.value}** → **{c.new.bottleneck.value}**")
    for key, side in (("A", c.base), ("B", c.new)):
        if (
            side.ranks is not None
        ):  # several ranks (a --trace-ranks run's summaries): as `compare` prints them
            st.caption(f"{key} ranks: {ui.text(ranks_line(side.ranks))}")
    moved = movers_frame(c)
    if len(moved):
        st.caption("What moved most, ms per step (B − A)")
        st.dataframe(moved, hide_index=True, width="stretch")
    for n in c.notes:
        st.caption(ui.text(n))
    _downloads(c, tables)
    return c


def as_a_b(reason: str) -> str:
    """The gate's sentence (written for ``advisors compare BASE NEW``) in this page's names: A and B."""
    return re.sub(r"\bBASE\b", "A", re.sub(r"\bNEW\b", "B", reason))


#: The kernels/operators that moved: full width, the name taking the room, the numbers narrow and named as above.
DELTA_NAMES = {"a_ms": "A ms", "b_ms": "B ms", "delta_ms": "B − A ms"}
DELTA_COLUMNS = {
    "name": st.column_config.TextColumn(width="large"),
    **{
        c: st.column_config.NumberColumn(format="%.3f", width="small") for c in DELTA_NAMES.values()
    },
}


def deltas_frame(table: pd.DataFrame) -> pd.DataFrame:
    """``name, a_ms, b_ms, delta_ms`` as shown: ms per step to the µs, the columns in the page's words."""
    return table.rename(columns=DELTA_NAMES).round(3)


def movers_frame(c: RegressionCheck) -> pd.DataFrame:
    rows = [
        {
            "kind": kind,
            "name": m.name,
            "A ms": round(m.base_ms, 3),
            "B ms": round(m.new_ms, 3),
            "B − A ms": round(m.delta_ms, 3),
        }
        for kind, attr in KINDS
        for m in getattr(c.movers, attr)
    ]
    return pd.DataFrame(rows, columns=["kind", "name", "A ms", "B ms", "B − A ms"])


def _downloads(c: RegressionCheck, tables: Comparison) -> None:
    stem = (
        re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{tables.label_a}-vs-{tables.label_b}")[:80].strip("._")
        or "comparison"
    )
    cols = st.columns(3)
    for col, (fmt, title) in zip(cols, (("html", "HTML"), ("json", "JSON"), ("md", "Markdown"))):
        col.download_button(
            f"Download comparison ({title})",
            data=partial(export.render_comparison, c, tables, fmt),
            file_name=f"stepwise-compare-{stem}.{fmt}",
            mime=export.FORMATS[fmt],
            key=f"compare.{fmt}",
            on_click="ignore",
            icon=":material/download:",
        )
    st.caption(
        "The same verdict in CI: `stepwise compare BASE NEW --max-slowdown 5` exits 1 on a "
        "regression and 3 when inconclusive."
    )
