"""Launch: run a sample workload (its settings in a form, its command line shown) or profile your own script
unmodified — both the same way, through the launcher and its agent; follow it live."""

from __future__ import annotations

import streamlit as st

from app import data, state

from app.services import launching

from app.widgets import links, live_view

from app.widgets import spec_form

from app.widgets import ui
from profilers.errors import StepwiseError
from profilers.run.records import RunStatus
from profilers.run.script_spec import ScriptSpec

st.title("Launch a run")
store = data.store()
# the followed run's live view goes first, filled in below once Start has run: after Start it is in view at
# once, never under the ~1,700 px form
live_area = st.container()
if st.query_params.get("what") == "script":  # the first page's "Profile my script"
    st.session_state["launch.what"] = "My training script"
    st.query_params.pop("what")
what = st.radio(
    "What to run", ["Sample workload", "My training script"], horizontal=True, key="launch.what"
)

if what == "Sample workload":
    infos = {w.name: w for w in launching.workloads()}
    left, right = st.columns([2, 1])
    name = left.selectbox(
        "Workload",
        list(infos),
        key="launch.workload",
        format_func=lambda n: f"{n} — {infos[n].intended_bottleneck or 'mixed'}-bound",
    )
    size = right.selectbox(
        "Size",
        infos[name].sizes,
        key="launch.size",
        help="tiny: a smoke test, its steps over within a second or two (most of its few "
        "seconds is Python and torch starting); bench: long enough to watch the steps, "
        "the telemetry and the profiler's window live",
    )
    st.caption(ui.text(infos[name].description))
    values = spec_form.knob_inputs(
        launching.base_settings(name, size), f"launch.knob.{name}.{size}"
    )
    sets = st.text_area(
        "More settings (KEY=VALUE per line)",
        key="launch.sets",
        placeholder="params.images=128\ncudnn_benchmark=true",
        help="any flag of python -m sample_runs.train by its name, or a workload parameter "
        "(params.NAME)",
    )
    label = st.text_input("Label (optional)", key="launch.label")
    run_spec: ScriptSpec | None = None
    try:
        run_spec = launching.build_run(store, name, size, values, sets)
    except StepwiseError as err:
        st.error(ui.text(err))
    if run_spec is not None:
        st.markdown("The run is the workload's own training script, launched as yours would be:")
        st.code(launching.shown_command(run_spec), language="bash")
    if (
        st.button("Start", type="primary", key="launch.start", disabled=run_spec is None)
        and run_spec is not None
    ):
        try:
            handle = launching.start_workload(run_spec, store, name, label)
            state.set_launch_handle(handle)
            state.follow_run(handle.run_id)
        except StepwiseError as err:
            st.error(ui.text(err))
else:
    st.markdown(
        "Profile a training script **as it is**: Stepwise starts it with a profiler hook that finds "
        "its optimizer steps. Only the script path you type here is run."
    )
    with st.form("launch.script_form"):
        command = st.text_input(
            "Command", key="launch.command", placeholder="python train.py --epochs 1"
        )
        python = st.text_input(
            "Interpreter",
            value=launching.default_interpreter(),
            key="launch.python",
            help="the Python that runs the script (its environment's torch and libraries); "
            "by default the one this dashboard runs in",
        )
        cwd = st.text_input(
            "Working directory",
            key="launch.cwd",
            placeholder="the script's folder",
            help="where the script runs: relative paths in it (data/, config/) resolve from here, "
            "as in your shell after cd; blank: the script's own folder",
        )
        watch = st.checkbox(
            "Watch the whole run",
            key="launch.watch",
            help="run the script to its own end with every step recorded; it profiles itself when "
            "its step time, batch drawing or memory changes (the steps below per capture)",
        )
        steps = st.number_input(
            "Steps to profile", min_value=1, max_value=10_000, value=5, key="launch.steps"
        )
        label = st.text_input("Label (optional)", key="launch.script_label")
        submitted = st.form_submit_button("Start", type="primary")
    folder = launching.shown_cwd(
        st.session_state.get("launch.command") or "", st.session_state.get("launch.cwd")
    )
    if folder is not None:
        st.caption(ui.text(f"Runs in {folder}"))
    if submitted:
        try:
            handle = launching.start_script(
                command, int(steps), store, label, python=python, cwd=cwd, watch=watch
            )
            state.set_launch_handle(handle)
            state.follow_run(handle.run_id)
        except StepwiseError as err:
            st.error(ui.text(err))

with live_area:
    follow = state.followed_run() or launching.followable(
        store, links.followed()
    )  # a reload re-attaches
    if (
        follow is None and links.followed()
    ):  # ?follow=<id> naming no launched run: said, not an empty form
        st.warning(
            f"The link follows run `{ui.text(links.followed() or '', 80)}`, which is not a launched run in this "
            "store (deleted, a trial of an experiment, or from another machine): nothing to follow. Launch one "
            "below, or open the run list.",
            icon=":material/link_off:",
        )
    if follow is not None:
        state.follow_run(follow)
        links.show_followed(follow)
    running = [
        r
        for r in store.list(status=RunStatus.RUNNING, trials=False)
        if r.run_id != follow and r.kind != "experiment"
    ]
    if running:
        with st.expander(f"Other running runs ({len(running)})"):
            other = ui.run_picker(
                running,
                key="launch.follow",
                label="Follow",
                default=running[0].run_id,
                remember=False,
            )
            if other is not None and st.button("Follow this run", key="launch.follow_btn"):
                state.follow_run(other.run_id)
                follow = other.run_id
    if follow is not None:
        st.subheader("Live")
        live_view.render(follow)
    if follow is not None or running:
        st.divider()
