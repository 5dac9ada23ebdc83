"""Apply the advised fix to a launched run: an A/B experiment, and the ladder (several rounds of diagnose → fix →
measure). A sample workload's spec is patched; a launched script is run again with the fix injected at boot
(:mod:`app.services.script_apply`). Each is a stored experiment of the run (:mod:`app.services.stored_jobs`): its
progress and result are read from the store (:mod:`app.widgets.experiment_result`), so they survive a reload,
a closed tab and a restart, and any session opening this run finds them."""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

import streamlit as st

from advisors.experiments.results.stored_view import StoredView
from app import data, state
from app.services import experimenting, script_apply, stored_jobs
from app.widgets import experiment_result as result
from app.widgets import ui
from profilers.errors import StepwiseError
from profilers.run.records import RunRecord, RunStatus
from profilers.store.runs import RunStore
from advisors.analysis import Analysis

AB_CAPTION = (
    "Baseline and patched runs alternate (A B A B …) with the same seed and data; the fix is kept when "
    "the 95% interval of the throughput ratio clears +3% and the loss holds."
)


def _most_pairs(col: Any, trials: int) -> int:
    """The most pairs an arm may get when its pairs disagree or were competed for (never fewer than
    the runs per arm asked for)."""
    from advisors.experiments.experiment import Policy

    most = col.number_input(
        "Up to pairs",
        min_value=2,
        max_value=9,
        value=Policy.max_trials,
        key="advisor.max_trials",
        help="When the pairs disagree or other programs competed for the cores, more pairs are run, "
        "up to this many; as many as the runs per arm: never more (a contended fix says "
        "inconclusive sooner).",
    )
    return max(int(most), trials)


def render(record: RunRecord, analysis: Analysis) -> None:
    st.subheader("Apply the fix")
    if record.kind == "launch":
        _render_script(record, analysis)
        return
    if record.kind != "run" or analysis.run is None or analysis.run.spec is None:
        st.caption(
            "Apply needs a run launched from a sample workload (its spec can be patched); for an uploaded "
            "trace or your own script, the fix's code snippet above is the change to make."
        )
        return
    fixes = experimenting.candidate_fixes(analysis)
    if not fixes:
        st.info(
            "No fix can be tried on this run: the findings propose advice-only changes, or changes that "
            "cannot act on this device."
        )
        return
    store = data.store()
    by_id = {f.id: f for f in fixes}
    left, right, most_col = st.columns([3, 1, 1])
    fix_id = left.selectbox(
        "Fix to apply",
        list(by_id),
        format_func=lambda i: by_id[i].title,
        key=f"advisor.fix.{record.run_id}",
    )
    trials = right.number_input(
        "Runs per arm", min_value=2, max_value=7, value=3, key="advisor.trials"
    )
    most = _most_pairs(most_col, int(trials))
    st.caption(AB_CAPTION)
    busy = stored_jobs.busy(store, record.run_id)
    if st.button("Apply", type="primary", key="advisor.apply", disabled=busy):
        state.set_experiment_job(
            experimenting.start_experiment(
                store, record, analysis, by_id[fix_id], int(trials), most
            )
        )
        st.rerun()  # draws the buttons disabled and the stored experiment live
    _stored(store, record, "apply")
    st.divider()
    st.markdown("#### Several rounds: the optimisation ladder")
    cols = st.columns([1, 1, 2])
    rounds = cols[0].number_input("Rounds", min_value=1, max_value=5, value=3, key="advisor.rounds")
    if cols[2].button("Optimise", key="advisor.optimise", disabled=busy):
        state.set_ladder_job(
            experimenting.start_ladder(store, record, analysis, int(rounds), int(trials), most)
        )
        st.rerun()
    _stored(store, record, "ladder")


def _stored(store: RunStore, record: RunRecord, mode: Literal["apply", "ladder"]) -> None:
    """The newest stored experiment of ``mode`` started from this run: live while it runs, then its result.

    When the newest was cancelled or failed, the last finished one is kept in view below it (the dashboard
    walk: a cancelled second Apply hid the first one's result, with no way back to it)."""
    exp = stored_jobs.latest(store, record.run_id, mode)
    if exp is None:
        return
    result.follow(store, exp, _shows(store, record, exp, mode, "advisor"))
    if exp.status in (RunStatus.RUNNING, RunStatus.OK):
        return
    earlier = stored_jobs.last_finished(store, record.run_id, mode)
    if earlier is not None:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(earlier.created_unix))
        with st.expander(
            f"The last finished {'ladder' if mode == 'ladder' else 'Apply'} (started {when})"
        ):
            result.follow(store, earlier, _shows(store, record, earlier, mode, "advisor.earlier"))


def _shows(
    store: RunStore, record: RunRecord, exp: RunRecord, mode: Literal["apply", "ladder"], key: str
) -> Callable[[StoredView], None]:
    """How to draw a finished experiment's view (``key``: the prefix of its widgets' keys)."""
    if mode == "apply":

        def show_apply(view: StoredView) -> None:
            result.before_after(view, key)
            result.downloads(store, record, exp, "fix", f"{key}.export")

        return show_apply

    def show_ladder(view: StoredView) -> None:
        result.ladder(view, key)
        result.downloads(store, record, exp, "ladder", f"{key}.ladder_export")

    return show_ladder


def _render_script(record: RunRecord, analysis: Analysis) -> None:
    """Apply and the ladder on a launched script: the fix is injected at boot, the user's file is never written."""
    try:
        target = script_apply.target_of(record.run_dir, experimenting.device_of(analysis))
    except StepwiseError as err:
        st.info(
            f"Apply cannot run this script again: {ui.text(err)}. The fix's code snippet above is the change "
            "to make."
        )
        return
    offer = script_apply.offer(target, analysis.diagnosis)
    for fix, why in offer.yours:
        st.warning(f"**{ui.text(fix.title)}** — {ui.text(why)}", icon=":material/edit:")
        st.code(fix.snippet, language="python")
    if offer.not_here:
        st.caption(
            "Not tried on this run: " + "; ".join(ui.text(why) for _, why in offer.not_here) + "."
        )
    if not offer.fixes:
        st.info(
            "No fix can be injected into this script for what the advisor found"
            + (" (the changes above are yours to make)." if offer.yours else ".")
        )
        return
    by_id = {f.id: f for f in offer.fixes}
    left, mid, most_col, right = st.columns([3, 1, 1, 1])
    fix_id = left.selectbox(
        "Fix to apply",
        list(by_id),
        format_func=lambda i: by_id[i].title,
        key=f"advisor.fix.{record.run_id}",
    )
    trials = mid.number_input(
        "Runs per arm", min_value=2, max_value=7, value=3, key="advisor.trials"
    )
    most = _most_pairs(most_col, int(trials))
    steps = right.number_input(
        "Timed steps per run",
        min_value=1,
        max_value=1000,
        value=target.spec.measure_steps,
        key="advisor.script_steps",
    )
    target = target.with_steps(int(steps))
    knobs, reason = script_apply.injected_knobs(target, by_id[fix_id])
    if (
        knobs
    ):  # what the patched arm gets, said before it runs, with where its worker count comes from
        st.caption(
            "Apply injects "
            + ui.text(", ".join(f"{k}={v}" for k, v in knobs.items()))
            + (f" — {ui.text(reason)}." if reason else ".")
        )
    st.caption(
        AB_CAPTION
        + " Your script runs unmodified with the fix injected at boot (your file is never "
        "written): " + ui.text(script_apply.describe(target.spec)) + "."
    )
    store = data.store()
    busy = stored_jobs.busy(store, record.run_id)
    if st.button("Apply", type="primary", key="advisor.apply", disabled=busy):
        state.set_experiment_job(
            script_apply.start_experiment(
                store, record, analysis, target, by_id[fix_id], int(trials), most
            )
        )
        st.rerun()
    _stored(store, record, "apply")
    st.divider()
    st.markdown("#### Several rounds: the optimisation ladder")
    st.caption(
        "Each round diagnoses a fresh run of your script, injects the fix the diagnosis points to and "
        "measures it; a kept fix shows the line to change in your file."
    )
    cols = st.columns([1, 1, 2])
    rounds = cols[0].number_input("Rounds", min_value=1, max_value=5, value=3, key="advisor.rounds")
    if cols[2].button("Optimise", key="advisor.optimise", disabled=busy):
        state.set_ladder_job(
            script_apply.start_ladder(
                store, record, analysis, target, int(rounds), int(trials), most
            )
        )
        st.rerun()
    _stored(store, record, "ladder")
