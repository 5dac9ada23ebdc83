"""Launch page: the form builds the workload's command line, shows it and starts it as a script (the launch is
mocked), live view, cancel, bad input."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from profilers.run import launch
from profilers.run.records import RunStatus
from tests.app.conftest import assert_clean, open_page, plain
from tests.app.fake_runs import fake_capture, fake_run


@dataclass
class FakeHandle:
    run_id: str
    cancelled: list[str] = field(default_factory=list)

    def cancel(self, reason: str = "") -> None:
        self.cancelled.append(reason)


@pytest.fixture()
def started(store, monkeypatch):
    """Replace ``launch.start_script``: record the spec, store a half-done running run, return a fake handle."""
    calls: list = []

    def fake_start(spec, st_store, label=None, **_):
        record = fake_run(store, label=label or spec.name, status=RunStatus.RUNNING, steps=4)
        store.update(record.run_id, status=RunStatus.RUNNING)
        (store.path(record.run_id) / "progress.json").write_text(
            '{"step": 4, "total_steps": 10, "loss": 1.0, "eta_s": 3.5}'
        )
        handle = FakeHandle(record.run_id)
        calls.append((spec, handle))
        return handle

    monkeypatch.setattr(launch, "start_script", fake_start)
    return calls


def test_form_starts_workload_and_shows_it_live(store, started) -> None:
    at = open_page("launch")
    assert_clean(at)
    at.selectbox(key="launch.workload").set_value("data_bound").run()
    shown = at.code[0].value
    assert (
        shown == "python -m sample_runs.train data_bound --steps 12"
    )  # the command line, shown before it runs
    at.number_input(key="launch.knob.data_bound.tiny.num_workers").set_value(2).run()
    at.checkbox(key="launch.knob.data_bound.tiny.pin_memory").check().run()
    at.text_area(key="launch.sets").set_value("params.images=32").run()
    assert at.code[0].value == (
        "python -m sample_runs.train data_bound --steps 12 --num-workers 2 --pin-memory "
        "--set-param images=32"
    )
    at.button(key="launch.start").click().run()
    assert_clean(at)
    [(spec, handle)] = started
    assert spec.command[1:] == (
        "-m",
        "sample_runs.train",
        "data_bound",
        "--steps",
        "12",
        "--num-workers",
        "2",
        "--pin-memory",
        "--set-param",
        "images=32",
    )
    assert at.subheader[0].value == "Live"
    # the live view is above the form, in view right after Start (it sat under a ~1,700 px form: issue 42)
    shown = [n for n in at.main if getattr(n, "type", "") in ("subheader", "radio")]
    assert [n.type for n in shown][:2] == ["subheader", "radio"], shown
    assert "step 4 of 10" in at.get("progress")[0].proto.text
    at.button(key="launch.cancel").click().run()
    assert handle.cancelled == ["cancelled by you at step 4"]
    # the countdown stops with the click (the run is still ending): no ETA, the user's cancel in words
    bar = at.get("progress")[0].proto.text
    assert "left" not in bar and "stopping" in bar
    assert plain(at.info[0].value).startswith("Cancelled by you at step 4. The run is stopping")


def test_invalid_spec_is_explained(store, started) -> None:
    at = open_page("launch")
    at.selectbox(key="launch.workload").set_value("data_bound").run()
    at.checkbox(key="launch.knob.data_bound.tiny.persistent_workers").check().run()
    assert_clean(at)
    assert at.error and "persistent_workers needs num_workers > 0" in plain(at.error[0].value)
    assert (
        at.button(key="launch.start").disabled and not at.code
    )  # nothing to start, no command to show
    assert started == []


def test_the_launchers_settings_are_said_beside_the_command(store, started) -> None:
    at = open_page("launch")
    at.selectbox(key="launch.workload").set_value("memory_bound").run()
    assert (
        at.code[0].value
        == "python -m sample_runs.train memory_bound --steps 12   # memory limit 1500 MiB"
    )
    at.selectbox(key="launch.workload").set_value("communication_bound").run()
    assert at.code[0].value.endswith("# under torchrun, 2 rank(s) per node")


def test_script_launch_refuses_a_missing_script(store) -> None:
    at = open_page("launch")
    at.radio(key="launch.what").set_value("My training script").run()
    at.text_input(key="launch.command").set_value("python /nonexistent/train.py")
    at.button[0].click().run()  # the script form's Start
    assert_clean(at)
    assert at.error and "no such script" in plain(at.error[0].value)


def test_finished_run_links_to_analysis(store) -> None:
    record = fake_run(store)
    at = open_page("launch")
    at.session_state["stepwise.followed_run"] = record.run_id
    at.run()
    assert_clean(at)
    assert at.success and "ok" in at.success[0].value


def test_follow_and_cancel_a_run_this_session_did_not_start(store) -> None:
    """After a dashboard restart the session has no handle: the run is found in the store, followed, cancelled."""
    record = store.create(
        "run", "started before the restart", {"workload": "data_bound", "params": {"size": "tiny"}}
    )
    at = open_page("launch")
    assert_clean(at)
    assert at.expander[0].label == "Other running runs (1)"
    at.button(key="launch.follow_btn").click().run()
    assert at.subheader[0].value == "Live"
    at.button(key="launch.cancel").click().run()
    at.run()
    assert_clean(at)
    assert store.get(record.run_id).status is RunStatus.KILLED
    assert store.get(record.run_id).error == "cancelled by you before its first step"
    assert any(plain(i.value) == "Cancelled by you before its first step." for i in at.info)


def test_a_run_without_steps_draws_no_empty_chart(store) -> None:
    """The dashboard walk: while a launched run's Python and torch loaded, the live view drew empty axes
    (−1 to 4) under "starting". It says where the charts will come instead."""
    from app.widgets.live_view import NO_STEPS_YET

    record = store.create(
        "run", "just started", {"workload": "data_bound", "params": {"size": "tiny"}}
    )
    at = open_page("launch")
    at.session_state["stepwise.followed_run"] = record.run_id
    at.run()
    assert_clean(at)
    assert "starting" in at.get("progress")[0].proto.text
    assert NO_STEPS_YET in [c.value for c in at.caption] and not at.get("plotly_chart")


def test_a_link_following_an_unknown_run_says_so(store) -> None:
    """``/launch?follow=<unknown>`` silently showed an empty form (issue 33)."""
    at = open_page(None)
    at.query_params["follow"] = "20260101-000000-nothing-beef"
    at.switch_page("views/launch.py").run()
    assert_clean(at)
    assert any(
        "20260101-000000-nothing-beef" in w.value and "nothing to follow" in w.value
        for w in at.warning
    )


def test_a_watched_run_shows_its_captures_with_their_verdicts_and_asks_for_one(store) -> None:
    """The live view of a watched run: each capture's line (trigger, steps, the stored analysis's verdict) and the
    button that asks the job to profile its next steps (``capture.request``)."""
    record = fake_run(
        store,
        label="watched",
        status=RunStatus.RUNNING,
        kind="launch",
        files={"boot.json": {"watch": {"capture_steps": 3}}},
    )
    store.update(record.run_id, status=RunStatus.RUNNING)
    fake_capture(store, record)
    at = open_page("launch")
    at.session_state["stepwise.followed_run"] = record.run_id
    at.run()
    assert_clean(at)
    lines = [plain(m.value) for m in at.markdown if "captured steps" in plain(m.value)]
    assert len(lines) == 1 and lines[0].startswith(
        "step 3: step time +40% for 8 steps; captured steps 5–7: "
    )
    at.button(key="launch.capture").click().run()
    assert (store.path(record.run_id) / "capture.request").is_file()


def test_the_script_form_offers_to_watch_the_whole_run(store) -> None:
    at = open_page("launch")
    at.radio(key="launch.what").set_value("My training script").run()
    assert at.checkbox(key="launch.watch").label == "Watch the whole run"


def test_a_watched_run_draws_the_whole_run_with_its_captures_marked(store) -> None:
    """The live view of a long watched run: step time, batch drawing and loss over the whole run — its rolled-up
    steps included (``steps_rollup.jsonl``) — with the capture a band over its steps and a marker whose hover
    says its trigger."""
    import json

    record = fake_run(
        store,
        label="watched long",
        status=RunStatus.RUNNING,
        kind="launch",
        steps=8,
        files={"boot.json": {"watch": {"capture_steps": 3}}},
    )
    store.update(record.run_id, status=RunStatus.RUNNING)
    run_dir = store.path(record.run_id)
    with open(run_dir / "steps_rollup.jsonl", "w") as fh:
        for k in range(3):  # steps 8 … 3,007 rolled up, a thousand to a summary
            fh.write(
                json.dumps(
                    {
                        "rank": 0,
                        "first_step": 8 + 1000 * k,
                        "last_step": 1007 + 1000 * k,
                        "steps": 1000,
                        "t_unix_ns": 1,
                        "wall_ms_median": 50.0 + 10 * k,
                        "wall_ms_p10": 45.0,
                        "wall_ms_p90": 70.0 + 10 * k,
                        "data_share": 0.1 * k,
                        "loss_last": 0.5,
                    }
                )
                + "\n"
            )
    folder = run_dir / "captures" / "r0c001"
    folder.mkdir(parents=True)
    (folder / "capture.json").write_text(
        json.dumps(
            {
                "n": 1,
                "rank": 0,
                "steps": [2010, 2012],
                "status": "done",
                "started_unix": 1.0,
                "trigger": {
                    "kind": "data_share",
                    "step": 2008,
                    "reason": "batch drawing 10% → 40% of the step",
                },
            }
        )
    )
    at = open_page("launch")
    at.session_state["stepwise.followed_run"] = record.run_id
    at.run()
    assert_clean(at)
    [fig] = [
        json.loads(c.proto.spec) for c in at.get("plotly_chart") if "The whole run" in c.proto.spec
    ]
    step_time = next(t for t in fig["data"] if t.get("name") == "step time")
    assert max(step_time["x"]) == (2008 + 3007) / 2  # the last roll-up drawn at its middle step
    assert next(t for t in fig["data"] if t.get("name") == "batch drawing")["y"][-1] == 0.2
    [mark] = [t for t in fig["data"] if t.get("name") == "capture"]
    assert mark["x"] == [2011] and "data_share at step 2008" in mark["text"][0]
    bands = [s for s in fig["layout"]["shapes"] if s.get("type") == "rect"]
    assert len(bands) == 3 and {(b["x0"], b["x1"]) for b in bands} == {(2009.5, 2012.5)}
