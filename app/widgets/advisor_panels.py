"""Rendering of the advisor's diagnosis: the binding bottleneck, its evidence, the other findings and fixes."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from advisors.fixes import settings_for
from advisors.verdict import Bottleneck, Finding
from app.widgets import ui
from advisors.ranking import effort_level
from reports import advice
from advisors.analysis import Analysis
from reports.evidence import format_evidence

#: Streamlit's named text colours closest to :data:`reports.charts.BOTTLENECK_COLORS`.
COLOR_NAMES = {
    "data": "orange",
    "memory": "blue",
    "compute": "blue",
    "communication": "red",
    "host": "violet",
}


def _evidence_table(evidence: dict) -> None:
    """Labelled, unit-formatted values (:func:`reports.evidence.format_evidence`) in a static table: every row
    shown and a long value (the MFU sentence) wrapped, never cut off at the cell's right edge."""
    rows = [{"measure": label, "value": str(value)} for label, value in format_evidence(evidence)]
    if rows:
        st.table(pd.DataFrame(rows), hide_index=True, border="horizontal")


def _fix(fix_id: str | None, key: str, a: Analysis) -> None:
    """A fix's title, explanation and snippet; its spec patch only for a run of a spec (a script or an upload
    has no spec to change: "As a spec change" read as a step the user could not take), as it would be applied
    to that run's spec on its device (no ``pin_memory`` on a CPU: it does nothing there)."""
    fix = advice.fix_for(fix_id, a.diagnosis)
    if fix is None:
        return
    st.markdown(f"**Fix — {ui.text(fix.title)}.** {ui.text(fix.explanation)}")
    st.code(fix.snippet, language="python")
    run = (
        a.run
    )  # a sample workload's run: the fix's settings are its flags' names (stepwise run W --set …)
    workload_run = run is not None and run.spec is not None and run.spec.workload is not None
    patch = settings_for(fix, run.device) if workload_run and run is not None else {}
    if patch:
        st.caption(
            "As a spec change: " + ui.text(", ".join(f"{k} = {v}" for k, v in patch.items()))
        )


def bound_text(a: Analysis, f: Finding) -> str:
    """ " · its fix gains at most 1.52×" — the bound an Apply of that fix shows too (``Analysis.bound_of``); empty
    when the finding's severity is not step time."""
    bound = a.bound_of(f)
    return (
        f" · its fix gains at most {bound.speedup:.2f}×"
        if bound is not None and bound.speedup
        else ""
    )


def _related(f: object, key: str, a: Analysis) -> None:
    """The other rules that saw the same time as ``f``: their message, evidence and fix."""
    related = getattr(f, "related", ())
    if not related:
        return
    st.markdown("**Other rules that saw the same time**")
    for j, m in enumerate(related):
        st.markdown(f"- `{m.rule}` {ui.text(m.name)}: {ui.text(m.message)}")
        _evidence_table(dict(m.evidence))
        if m.fix_id is not None and m.fix_id == getattr(f, "fix_id", None):
            st.caption("Its fix is the one above.")  # not the same code block twice
        else:
            _fix(m.fix_id, f"{key}.rel{j}", a)


def diagnosis(a: Analysis) -> None:
    """The verdict first, then the ranked findings, then what could not be judged."""
    d = a.diagnosis
    if d is None:
        st.warning(ui.text(a.advisor_note or "The advisor gave no diagnosis for this input."))
        return
    if d.binding is None:
        st.success("Nothing binds: no rule found step time at stake.")
        caveats(a)
    else:
        with st.container(border=True):
            st.markdown(
                f"### :{COLOR_NAMES.get(d.bottleneck.value, 'gray')}[Binding bottleneck: "
                f"**{d.bottleneck.value}**]"
            )
            st.markdown(f"{ui.text(d.binding.message)}")
            st.progress(
                d.confidence,
                text=f"confidence {d.confidence:.0%} · {d.binding.severity:.0%} of step "
                f"time at stake{bound_text(a, d.binding)} · rule {d.binding.rule}",
            )
        caveats(a)
        fix_order(a)
        with st.expander("Evidence", expanded=True):
            _evidence_table(dict(d.evidence))
            if (
                a.layers.evidence()
            ):  # where in the model (the Analysis page's Layers tab has the tree)
                st.caption(ui.text(a.layers.evidence()))
        _fix(d.binding.fix_id, "binding", a)
        _related(d.binding, "binding", a)
    if d.others:
        st.markdown("#### Other findings, most severe first")
        for i, f in enumerate(d.others):
            with st.expander(f"{f.severity:.0%} · {f.bottleneck.value} · {f.rule} {f.name}"):
                st.markdown(ui.text(f.message))
                st.caption(f"confidence {f.confidence:.0%}{bound_text(a, f)}")
                _evidence_table(dict(f.evidence))
                _fix(f.fix_id, f"other{i}", a)
                _related(f, f"other{i}", a)
    judged = [n for n in d.notes if n.bottleneck is not Bottleneck.NONE]
    if judged:
        with st.expander(f"Not enough data to judge ({len(judged)})"):
            for n in judged:
                st.markdown(f"- **{n.bottleneck.value}**: {ui.text(n.reason)}")


def fix_order(a: Analysis) -> None:
    """The fixes in the order to try them (gain for effort) and the close second, as ``analyze`` prints them (issue
    42: the CLI said "dataloader_workers goes first", the page tucked that finding under "Other findings")."""
    r = a.ranking
    if r is None or not r.order:
        return
    if r.close_second is not None and r.why_first:
        st.info(
            f"**Close second: {r.close_second.bottleneck.value}.** {ui.text(r.why_first)}.",
            icon=":material/compare_arrows:",
        )
    lines = []
    for i, f in enumerate(r.order, 1):
        fix = advice.fix_for(f.fix_id, a.diagnosis)
        bound = a.bound_of(f)
        gain = f", up to {bound.speedup:.2f}×" if bound is not None and bound.speedup else ""
        title = fix.title if fix is not None else str(f.fix_id)
        lines.append(
            f"{i}. **{ui.text(title)}** — {f.bottleneck.value}, {f.severity:.0%} of the step at stake"
            f"{gain}; effort: {ui.text(effort_level(f))}"
        )
    st.markdown("**Fix order** (most gain for the least effort first)\n\n" + "\n".join(lines))


def caveats(a: Analysis) -> None:
    """Notes about the measurement itself (other programs' load on the machine, …): shown beside the verdict,
    not as "none: …" inside "Not enough data to judge" (dashboard walk)."""
    d = a.diagnosis
    for n in d.notes if d is not None else ():
        if n.bottleneck is Bottleneck.NONE:
            st.warning(ui.text(n.reason, 1000), icon=":material/warning:")
