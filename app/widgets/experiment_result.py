"""A stored experiment on the Advisor page: its live progress while it runs (any session, after a reload or a
restart), then its stored result — before/after or the ladder — and its stored reports. Renders the stored
records (:mod:`advisors.experiments.results.stored_view`), never a job in memory, and computes nothing of its own."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import pandas as pd
import streamlit as st

from advisors.experiments.progress import Progress
from advisors.experiments.results.outcome import Word
from advisors.experiments.results.record import ExperimentRecord
from advisors.experiments.results.stored_view import StoredView, read_view
from app.services import stored_jobs
from app.widgets import ui
from profilers.run.records import RunRecord, RunStatus
from profilers.store import experiments
from profilers.store.runs import RunStore
from reports.charts import compare as charts_compare
from reports.export import FORMATS
from stepwise_agent import steady

POLL_S = 1.0


def follow(store: RunStore, record: RunRecord, show: Callable[[StoredView], None]) -> None:
    """Poll the stored experiment while it runs; once it has ended, rerun the page once, then show its view."""
    polling = record.status is RunStatus.RUNNING
    about = experiments.about(store, record.run_id)
    name = "ladder" if about.get("mode") == "ladder" else "experiment"
    title = about.get("fix_title") or about.get("fix")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_unix))
    st.caption(
        ui.text(
            f"{'Ladder' if name == 'ladder' else 'Apply'}{f': {title}' if title else ''} · started {when}"
        )
    )

    @st.fragment(run_every=POLL_S if polling else None)
    def _poll() -> None:
        now = store.get(record.run_id)
        if now.status is RunStatus.RUNNING:
            p = Progress.from_dict(experiments.progress(store, record.run_id))
            if stored_jobs.cancel_requested(store, record.run_id):
                stored_jobs.stop_trials(
                    store, record.run_id
                )  # a trial that started in the moment of the cancel
                st.progress(p.fraction, text="Cancelling: stopping the trial run…")
            else:
                st.progress(
                    p.fraction, text=f"{p.describe} · {time.time() - now.created_unix:.0f} s"
                )
                st.button(
                    f"Cancel the {name}",
                    key=f"advisor.cancel.{record.run_id}",
                    icon=":material/stop:",
                    on_click=stored_jobs.cancel,
                    args=(store, record.run_id),
                )
        elif polling:
            st.rerun(scope="app")
        elif now.status is RunStatus.KILLED and (now.error or "").startswith(
            stored_jobs.CANCELLED_BY_YOU
        ):
            st.warning(
                f"**Outcome: cancelled** — the {name} was {ui.text(now.error)}. No result was judged.",
                icon=":material/stop_circle:",
            )
        elif now.status is not RunStatus.OK:
            st.error(
                f"The {name} stopped ({now.status.value}): {ui.text(now.error or 'no reason stored', 2000)}"
            )
        else:
            view = read_view(experiments.view(store, record.run_id))
            if view is None:
                st.warning(f"The {name} ended but its result could not be read back.")
            else:
                show(view)
        n = len(experiments.trials(store, record.run_id))
        st.caption(
            f"Stored as {ui.text(record.run_id)} with {n} trial run{'' if n == 1 else 's'} (hidden from "
            "the run list; `stepwise list --all` shows them)."
        )

    _poll()


#: Two lines: the chart sits in half the page's width, where one line was cut off at "(mean ms per".
BREAKDOWN_TITLE = "Breakdown before vs after: the profiled window's steps<br>(mean ms per step, first run of each arm)"
BREAKDOWN_NOTE = (
    "The breakdown covers only the steps the profiler traced in each arm's first run (profiler on), "
    "so its bars need not add up to the median measured step above, which covers every timed step of "
    "every run."
)


def outcome_box(text: str, word: str) -> None:
    """The outcome ``text`` (the word with its why), always visible, in its ``word``'s colour."""
    box = (
        st.success
        if word == Word.KEPT
        else st.info
        if word == Word.NOT_APPLIED
        else st.warning
        if word == Word.INCONCLUSIVE
        else st.error
    )
    icon = (
        ":material/check_circle:"
        if word == Word.KEPT
        else ":material/block:"
        if word == Word.NOT_APPLIED
        else ":material/cancel:"
    )
    box(f"**Outcome: {ui.text(text, 600)}**", icon=icon)


def before_after(view: StoredView, key: str = "advisor") -> None:
    """An Apply's result, from its record: its outcome word, the two samples/s and the speed-up they give, the
    bound with the diagnosis it comes from, the charts (``key`` prefixes their keys: the same view can be drawn
    twice on a page, the newest experiment and the last finished one)."""
    x = view.record
    assert x is not None
    outcome_box(x.outcome_text, x.outcome)
    if x.outcome == "not applied":
        st.caption(
            'The fix never acted in the patched run, so no speed-up was judged: this is not a "no gain" '
            "verdict."
        )
        memory_peaks(x, key)
        return _change_and_charts(view, judged=False, key=key)
    unit = x.rate_unit
    rate = (
        f"{unit}: total samples over total time of the timed steps of a run, the median over the arm's runs"
        if unit == "samples/s"
        else "steps/s: the script's batches were not seen (no DataLoader), so its steps "
        "over their total time, the median over the arm's runs"
    )
    cols = st.columns(4 if x.bound else 3)
    cols[0].metric(
        f"Before: {unit}", _rate(x.before_samples_per_s), help=f"The {x.before_label}'s {rate}."
    )
    cols[1].metric(
        f"After: {unit}", _rate(x.after_samples_per_s), help=f"The patched arm's {rate}."
    )
    if x.speedup:
        interval = (
            f", {x.level:.0%} interval [{x.low:.2f}, {x.high:.2f}]" if x.low is not None else ""
        )
        cols[2].metric(
            "Speed-up",
            f"{x.speedup:.2f}×",
            help=f"After over before: the number that decided the verdict{interval}.",
        )
    if x.bound:
        cols[-1].metric(
            "Upper bound",
            f"{x.bound.speedup:.2f}×",
            help=f"From {x.bound.baseline}: the speed-up {x.bound.assumption or 'if the time at stake vanished'}"
            " (1 / (1 − share)). The measured ratio is read against it.",
        )
        st.caption(ui.text(f"Upper bound {x.bound.text}."))
    if x.speedup and x.low is not None:
        pairs = x.pair_ratios
        st.caption(
            f"Speed-up {x.speedup:.2f}× = {_rate(x.after_samples_per_s)} ÷ {_rate(x.before_samples_per_s)} "
            f"{unit}, {x.level:.0%} interval [{x.low:.2f}, {x.high:.2f}]"
            + (
                f"; each back-to-back pair: {', '.join(f'{p:.2f}×' for p in pairs)}"
                if pairs
                else ""
            )
            + ". "
            f"Time per step {_ms(x.before_step_ms)} before, {_ms(x.after_step_ms)} after "
            f"(the same speed: one step's samples over the samples/s){_typical(x)}."
        )
    memory_peaks(x, key)
    _change_and_charts(view, judged=True, key=key)


#: what each bar of :func:`memory_peaks` counts
MEMORY_NOTE = (
    "Live tensors: the profiler's peak of allocated bytes over the profiled steps (the step's own "
    "tensors). Run peak: everything the process held (its resident memory on a CPU, the CUDA "
    "allocator's peak on a GPU)."
)


def memory_peaks(x: ExperimentRecord, key: str) -> None:
    """A memory fix's peaks beside the step time they cost, from its record (nothing when none was
    recorded): the sentence ``optimize`` prints, then each peak before beside after."""
    said, m = x.memory_text, x.memory
    if said is None or m is None:
        return
    st.markdown(f"**Memory:** {ui.text(said)}")
    if m.bars():
        ui.chart(charts_compare.memory_peaks(m.bars()), key=f"{key}.memory")
        st.caption(MEMORY_NOTE)


def _typical(x: ExperimentRecord) -> str:
    """The typical (median) steps beside the times per step, when either arm's differ by more than
    10%."""
    arms = ((x.before_step_ms, x.before_typical_ms), (x.after_step_ms, x.after_typical_ms))
    if not any(steady.typical_apart(per, typ) for per, typ in arms):
        return ""
    return (
        f"; typical step (median) {_ms(x.before_typical_ms)} before, "
        f"{_ms(x.after_typical_ms)} after (every timed step of every run; the box plot's line)"
    )


def _change_and_charts(view: StoredView, judged: bool, key: str = "advisor") -> None:
    x, ev = view.record, view.evidence or {}
    assert x is not None
    st.caption(
        ("Injected at boot (your file was not written): " if x.injected else "Spec change: ")
        + ui.text(", ".join(f"{k} = {v}" for k, v in x.spec_change.items()) or "none")
    )
    if judged and ev.get("step_samples"):
        ui.chart(
            charts_compare.step_time_distributions(
                ev["step_samples"],
                "Measured step time before and after "
                "(every timed step of every run; line = median)",
            ),
            key=f"{key}.before_after",
        )
    left, right = st.columns(2)
    with left:
        if judged and ev.get("breakdowns"):
            ui.chart(
                charts_compare.breakdown_side_by_side(ev["breakdowns"], BREAKDOWN_TITLE),
                key=f"{key}.bd",
            )
            st.caption(BREAKDOWN_NOTE)
    with right:
        if ev.get("loss_curves"):
            curves = charts_compare.loss_curves(
                ev["loss_curves"], "Loss curves overlaid", bool(ev.get("loss_identical"))
            )
            ui.chart(curves, key=f"{key}.loss")
    if x.injected:
        if x.change_to_make is not None:
            change_block(x.where, x.change_to_make)
        elif x.where:
            st.caption(f"Where the change would go in your code: {ui.text(x.where)}.")


def ladder(view: StoredView, key: str = "advisor") -> None:
    """A ladder's result, from its record: why it stopped, the total, the chart and one row per round."""
    lad = view.ladder
    assert lad is not None
    (st.success if lad.complete else st.warning)(ui.text(lad.why_stopped), icon=":material/stairs:")
    st.markdown(f"Total measured speed-up of the kept fixes: **{lad.total_speedup:.2f}×**")
    steps = pd.DataFrame(lad.steps)
    if len(steps) > 1:
        ui.chart(charts_compare.ladder(steps), key=f"{key}.ladder_chart")
    if lad.rounds:
        st.table(ladder_table(lad.rounds))
        if any(x.bound for x in lad.rounds):
            st.caption(
                "Each upper bound comes from the diagnosis of that round's own baseline run (a fresh run of "
                "the spec or script as it stood), so rounds differ in their bounds."
            )
        for x in lad.rounds:
            if x.memory_text:
                st.caption(ui.text(f"Round {x.round} ({x.fix_title}) memory: {x.memory_text}."))
            if x.baseline_moved:
                st.warning(
                    ui.text(x.baseline_moved[:1].upper() + x.baseline_moved[1:] + "."),
                    icon=":material/swap_vert:",
                )
    for x in lad.rounds:
        if x.change_to_make is not None and x.injected:
            st.markdown(f"Round {x.round}: **{ui.text(x.fix_title)}** kept")
            change_block(x.where, x.change_to_make)
    for a in lad.not_retried:
        st.info(
            f"Not re-tried: **{ui.text(a.fix_title)}** — {ui.text(a.why)}",
            icon=":material/history:",
        )
    for a in lad.advice:
        st.warning(f"**{ui.text(a.fix_title)}** — {ui.text(a.why)}", icon=":material/edit:")
        st.code(a.snippet, language="python")


def ladder_table(rounds: tuple[ExperimentRecord, ...]) -> pd.DataFrame:
    """One row per round's attempt, its outcome word first; numbers an attempt does not have (a fix that never
    acted) blank (a static table: long outcomes wrap instead of being cut off)."""
    out = []
    for x in rounds:
        judged = x.outcome not in ("not applied", "failed")
        out.append(
            {
                "round": x.round,
                "fix": x.fix_title,
                "outcome": x.outcome_text,
                "before samples/s": _num(x.before_samples_per_s, 1, _steps(x)) if judged else "",
                "after samples/s": _num(x.after_samples_per_s, 1, _steps(x)) if judged else "",
                "speed-up": _num(x.speedup, 2, "×") if judged else "",
                "interval": f"[{x.low:.2f}, {x.high:.2f}]"
                if judged and x.low is not None and x.high is not None
                else "",
                "ms/step before → after": _arrow(x.before_step_ms, x.after_step_ms)
                if judged
                else "",
                "upper bound": _num(x.bound.speedup if x.bound else None, 2, "×"),
                "cumulative": _num(x.cumulative_speedup, 2, "×"),
            }
        )
    return pd.DataFrame(out).set_index("round")


def _steps(x: ExperimentRecord) -> str:
    """A rate that counts steps, not samples (no DataLoader was seen), says so in its cell."""
    return "" if x.rate_unit == "samples/s" else " steps/s"


def _arrow(before: Any, after: Any) -> str:
    """Two times per step, before → after (the same speed as the samples/s beside them)."""
    return (
        f"{before:.1f} → {after:.1f}"
        if isinstance(before, (int, float)) and isinstance(after, (int, float))
        else ""
    )


def _num(value: Any, digits: int, unit: str = "") -> str:
    return f"{value:.{digits}f}{unit}" if isinstance(value, (int, float)) else ""


def _ms(value: float | None) -> str:
    return f"{value:.1f} ms" if value else "—"


def change_block(where: str | None, change: Mapping[str, Any] | None) -> None:
    """The edit for a kept fix: your command line or config file (the script's own flag for it), else file:line,
    then the unified diff (or the snippet to place there)."""
    kind = (change or {}).get("kind")
    if kind == "command":
        st.markdown("**The change to make** on your command line (your script's own flag):")
    elif kind == "config":
        st.markdown(
            f"**The change to make** in your config file {ui.text(str(change.get('file')))}:"  # type: ignore[union-attr]
        )
    elif where:
        st.markdown(f"**The change to make** at {ui.text(where)}:")
    else:
        st.markdown("**The change to make** (no single place in your code: once, at start-up):")
    if change:
        st.code(
            change["text"],
            language="diff" if change["kind"] in ("diff", "command", "config") else "python",
        )


def downloads(
    store: RunStore, source: RunRecord, experiment: RunRecord, what: str, key: str
) -> None:
    """The source run's report with this result in it, in every format, as stored when it finished."""
    cols = st.columns(3)
    for col, fmt in zip(cols, ("html", "md", "json")):
        body = experiments.report(store, experiment.run_id, fmt)
        if body is not None:
            col.download_button(
                f"Report with this {what} ({fmt.upper()})",
                key=f"{key}.{fmt}",
                data=body,
                file_name=f"stepwise-{source.run_id}-{what}.{fmt}",
                mime=FORMATS[fmt],
                on_click="ignore",
                icon=":material/download:",
            )


def _rate(value: float | None) -> str:
    return f"{value:,.1f}" if value else "—"


QUALITY_MODE = (
    "to_quality"  # ``cli.optimize_quality.MODE``: an ``optimize --to-quality`` experiment
)


def from_command_line(store: RunStore, record: RunRecord) -> None:
    """An experiment started by ``python -m advisors optimize`` from a spec or a script (no run of the list it
    belongs to): where its result is — the Advisor's time-to-quality panel, or its stored reports. The dashboard
    walk found "Its result is on the Advisor page of the run it was started from" and no link at all."""
    about = experiments.about(store, record.run_id)
    seen = read_view(experiments.view(store, record.run_id)) if record.status.finished else None
    # its outcome word, not "ok" beside it
    said = seen.label if seen is not None else record.status.value
    st.info(
        f"{ui.text(record.label)}: an experiment ({ui.text(said)}) started on the command line "
        "(`stepwise optimize`), from a spec or a script rather than from a run of this list.",
        icon=":material/science:",
    )
    if about.get("mode") == QUALITY_MODE:
        st.page_link(
            "views/advisor.py",
            label="Open its time-to-quality result",
            icon=":material/lightbulb:",
            query_params={"quality": record.run_id},
        )
    cols = st.columns(3)
    for col, fmt in zip(cols, ("html", "md", "json")):
        body = experiments.report(store, record.run_id, fmt)
        if body is not None:
            col.download_button(
                f"Its report ({fmt.upper()})",
                key=f"runs.exp_report.{fmt}",
                data=body,
                file_name=f"stepwise-{record.run_id}.{fmt}",
                mime=FORMATS[fmt],
                on_click="ignore",
                icon=":material/download:",
            )
