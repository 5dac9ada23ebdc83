"""Apply the advised fix to a launched run: an A/B experiment with progress, then before/after charts; and the
ladder (several rounds of diagnose → fix → measure) as a table. A sample workload's spec is patched; a launched
script is run again with the fix injected at boot (:mod:`app.services.script_apply`), and a kept fix shows the change to
make in the user's file (the diff, at file:line)."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from app import data, state

from app.services import experimenting

from app.services import script_apply

from app.widgets import ui
from app.services.jobs import BackgroundJob
from profilers.errors import StepwiseError
from profilers.run.records import RunRecord
from reports import advice, charts_compare, export
from reports import experiment as ex
from reports.analysis import Analysis

POLL_S = 1.0
AB_CAPTION = ("Baseline and patched runs alternate (A B A B …) with the same seed and data; the fix is kept when "
              "the 95% interval of the throughput ratio clears +3% and the loss holds.")


def render(record: RunRecord, analysis: Analysis) -> None:
    st.subheader("Apply the fix")
    if record.kind == "launch":
        _render_script(record, analysis)
        return
    if record.kind != "run" or analysis.run is None or analysis.run.spec is None:
        st.caption("Apply needs a run launched from a sample workload (its spec can be patched); for an uploaded "
                   "trace or your own script, the fix's code snippet above is the change to make.")
        return
    if not experimenting.available():
        st.info(experimenting.EXPERIMENT_MISSING)
        return
    fixes = experimenting.candidate_fixes(analysis)
    if not fixes:
        st.info("No fix can be tried on this run: the findings propose advice-only changes, or changes that "
                "cannot act on this device.")
        return
    by_id = {f.id: f for f in fixes}
    left, right = st.columns([3, 1])
    fix_id = left.selectbox("Fix to apply", list(by_id), format_func=lambda i: by_id[i].title, key=f"advisor.fix.{record.run_id}")
    trials = right.number_input("Runs per arm", min_value=2, max_value=7, value=3, key="advisor.trials")
    st.caption(AB_CAPTION)
    job = state.experiment_job()
    busy = job is not None and not job.done
    if st.button("Apply", type="primary", key="advisor.apply", disabled=busy):
        state.set_experiment_job(experimenting.start_experiment(data.store(), analysis, by_id[fix_id], int(trials)))
        job = state.experiment_job()
    if job is not None:
        _follow(job, "experiment", lambda e: (_before_after(e, analysis), _downloads(record, analysis, e)))
    st.divider()
    st.markdown("#### Several rounds: the optimisation ladder")
    cols = st.columns([1, 1, 2])
    rounds = cols[0].number_input("Rounds", min_value=1, max_value=5, value=3, key="advisor.rounds")
    ladder = state.ladder_job()
    if cols[2].button("Optimise", key="advisor.optimise", disabled=ladder is not None and not ladder.done):
        state.set_ladder_job(experimenting.start_ladder(data.store(), analysis, int(rounds), int(trials)))
        ladder = state.ladder_job()
    if ladder is not None:
        _follow(ladder, "ladder", lambda lad: (_ladder(lad), _ladder_downloads(record, analysis, lad)))


def _render_script(record: RunRecord, analysis: Analysis) -> None:
    """Apply and the ladder on a launched script: the fix is injected at boot, the user's file is never written."""
    if not experimenting.available():
        st.info(experimenting.EXPERIMENT_MISSING)
        return
    try:
        target = script_apply.target_of(record.run_dir, experimenting.device_of(analysis))
    except StepwiseError as err:
        st.info(f"Apply cannot run this script again: {ui.text(err)}. The fix's code snippet above is the change "
                "to make.")
        return
    offer = script_apply.offer(target, analysis.diagnosis)
    for fix, why in offer.yours:
        st.warning(f"**{ui.text(fix.title)}** — {ui.text(why)}", icon=":material/edit:")
        st.code(fix.snippet, language="python")
    if offer.not_here:
        st.caption("Not tried on this run: " + "; ".join(ui.text(why) for _, why in offer.not_here) + ".")
    if not offer.fixes:
        st.info("No fix can be injected into this script for what the advisor found"
                + (" (the changes above are yours to make)." if offer.yours else "."))
        return
    by_id = {f.id: f for f in offer.fixes}
    left, mid, right = st.columns([3, 1, 1])
    fix_id = left.selectbox("Fix to apply", list(by_id), format_func=lambda i: by_id[i].title, key=f"advisor.fix.{record.run_id}")
    trials = mid.number_input("Runs per arm", min_value=2, max_value=7, value=3, key="advisor.trials")
    steps = right.number_input("Timed steps per run", min_value=1, max_value=1000, value=target.spec.measure_steps,
                               key="advisor.script_steps")
    target = target.with_steps(int(steps))
    st.caption(AB_CAPTION + " Your script runs unmodified with the fix injected at boot (your file is never "
               "written): " + ui.text(script_apply.describe(target.spec)) + ".")
    job = state.experiment_job()
    busy = job is not None and not job.done
    if st.button("Apply", type="primary", key="advisor.apply", disabled=busy):
        state.set_experiment_job(script_apply.start_experiment(data.store(), target, by_id[fix_id], int(trials)))
        job = state.experiment_job()
    if job is not None:
        _follow(job, "experiment", lambda e: (_before_after(e, analysis), _change(e), _downloads(record, analysis, e)))
    st.divider()
    st.markdown("#### Several rounds: the optimisation ladder")
    st.caption("Each round diagnoses a fresh run of your script, injects the fix the diagnosis points to and "
               "measures it; a kept fix shows the line to change in your file.")
    cols = st.columns([1, 1, 2])
    rounds = cols[0].number_input("Rounds", min_value=1, max_value=5, value=3, key="advisor.rounds")
    ladder = state.ladder_job()
    if cols[2].button("Optimise", key="advisor.optimise", disabled=ladder is not None and not ladder.done):
        state.set_ladder_job(script_apply.start_ladder(data.store(), target, int(rounds), int(trials)))
        ladder = state.ladder_job()
    if ladder is not None:
        _follow(ladder, "ladder", lambda lad: (_ladder(lad), _ladder_downloads(record, analysis, lad)))


def _change_block(where: str | None, change: dict[str, Any] | None) -> None:
    """The edit for a kept fix: file:line, then the unified diff (or the snippet to place there)."""
    if where:
        st.markdown(f"**The change to make** at {ui.text(where)}:")
    else:
        st.markdown("**The change to make** (no single place in your code: once, at start-up):")
    if change:
        st.code(change["text"], language="diff" if change["kind"] == "diff" else "python")


def _change(e: Any) -> None:
    """For a script: a kept fix's diff at its file:line; a fix that did not act says so (not "no gain")."""
    c = ex.script_change(e)
    if c is None:
        return
    if e.kept:
        _change_block(c["where"], c["change"])
    elif c["where"]:
        st.caption(f"Where the change would go in your code: {ui.text(c['where'])}.")


def _follow(job: BackgroundJob, name: str, show: Callable[[Any], None]) -> None:
    """Poll ``job`` in a fragment while it runs; once it has ended, rerun the page once (stops the polling)."""
    polling = not job.done

    @st.fragment(run_every=POLL_S if polling else None)
    def _poll() -> None:
        if not job.done:
            st.progress(experimenting.trial_fraction(job.last),
                        text=f"{experimenting.describe_progress(job.last)} · {job.elapsed_s:.0f} s")
        elif polling:
            st.rerun(scope="app")
        elif job.error:
            st.error(f"The {name} stopped: {ui.text(job.error, 2000)}")
        else:
            show(job.result)

    _poll()


def _before_after(e: Any, analysis: Analysis) -> None:
    s = ex.summary(e)
    bound = advice.upper_bound(analysis.diagnosis, e)
    if s["not_applied"]:
        st.info(ui.text(e.reason, 600), icon=":material/block:")
        st.caption("The fix never acted in the patched run, so no speed-up was judged: this is not a \"no gain\" "
                   "verdict.")
    else:
        (st.success if e.kept else st.warning)(ui.text(e.reason, 600))
    cols = st.columns(4 if bound else 3)
    paired = "geometric mean over the paired runs of each run's samples/s (what the ratio divides)"
    cols[0].metric("Before (samples/s)", _rate(s["before_samples_per_s"]), help=paired)
    cols[1].metric("After (samples/s)", _rate(s["after_samples_per_s"]), help=paired)
    if s["speedup"]:
        cols[2].metric("Throughput ratio", f"{s['speedup']:.2f}×", help=f"After over before, {s['level']:.0%} "
                       f"interval [{s['low']:.2f}, {s['high']:.2f}]")
    if bound:
        cols[-1].metric("Upper bound", f"{bound:.2f}×",
                        help="The diagnosis' bound on this fix: the speed-up if the time at stake vanished entirely "
                             "(1 / (1 − share)). The measured ratio is read against it.")
    if s["before_ms"] and s["after_ms"]:
        st.caption(f"Median step (median over runs of each run's median step): {s['before_ms']:.1f} ms before, "
                   f"{s['after_ms']:.1f} ms after, {s['median_ratio']:.2f}× by medians. The throughput ratio "
                   "divides total samples by total time, so steps of unequal length or a changed batch move it "
                   "differently from the medians.")
    st.caption(("Injected at boot (your file was not written): " if s["injected"] else "Spec change: ")
               + ui.text(", ".join(f"{k} = {v}" for k, v in s["spec_change"].items()) or "none"))
    ui.chart(charts_compare.step_time_distributions(ex.step_samples(e), "Step time before and after (every "
                                                    "measured step of every run pooled; box = interquartile range)"),
             key="advisor.before_after")
    left, right = st.columns(2)
    with left:
        b = ex.breakdowns(e)
        if b:
            ui.chart(charts_compare.breakdown_side_by_side(b, "Breakdown before vs after"), key="advisor.bd")
    with right:
        losses = ex.loss_curves(e)
        if losses:
            ui.chart(charts_compare.loss_curves(losses, "Loss curves overlaid"), key="advisor.loss")


def _rate(value: float | None) -> str:
    return f"{value:,.1f}" if value else "—"


def _ladder(ladder: Any) -> None:
    st.markdown(f"Total measured speed-up of the kept fixes: **{ladder.total_speedup:.2f}×**")
    steps = ex.ladder_steps(ladder)
    if len(steps) > 1:
        ui.chart(charts_compare.ladder(steps), key="advisor.ladder_chart")
    st.dataframe(ex.ladder_frame(ladder), hide_index=True, width="stretch")
    for c in ex.ladder_changes(ladder):
        if c["verdict"] == "kept":
            st.markdown(f"Round {c['round']}: **{ui.text(c['fix'])}** kept")
            _change_block(c["where"], c["change"])
        elif c["verdict"] == "not applied":
            st.info(f"Round {c['round']}: **{ui.text(c['fix'])}** — {ui.text(c['reason'], 600)}",
                    icon=":material/block:")
    for a in ex.ladder_advice(ladder):
        st.warning(f"**{ui.text(a['fix'])}** — {ui.text(a['why'])}", icon=":material/edit:")
        st.code(a["snippet"], language="python")


def _ladder_downloads(record: RunRecord, analysis: Analysis, ladder: Any) -> None:
    """The run's report with this ladder in it, in every format."""
    cols = st.columns(3)
    for col, fmt in zip(cols, ("html", "md", "json")):
        col.download_button(f"Report with this ladder ({fmt.upper()})", key=f"advisor.ladder_export.{fmt}",
                            data=lambda fmt=fmt: export.render(analysis, fmt, ladder=ladder),
                            file_name=f"stepwise-{record.run_id}-ladder.{fmt}", mime=export.FORMATS[fmt],
                            on_click="ignore", icon=":material/download:")


def _downloads(record: RunRecord, analysis: Analysis, e: Any) -> None:
    """The run's report with this before/after in it, in every format."""
    cols = st.columns(3)
    for col, fmt in zip(cols, ("html", "md", "json")):
        col.download_button(f"Report with this fix ({fmt.upper()})", key=f"advisor.export.{fmt}",
                            data=lambda fmt=fmt: export.render(analysis, fmt, experiment=e),
                            file_name=f"stepwise-{record.run_id}-fix.{fmt}", mime=export.FORMATS[fmt],
                            on_click="ignore", icon=":material/download:")
