"""Entry script, sidebar and the Runs page."""

from __future__ import annotations

import json

from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_capture, fake_run


def test_entry_renders_runs_page_and_states_telemetry(store) -> None:
    at = open_page()
    assert_clean(at)
    assert at.title[0].value == "Runs"
    sidebar = " ".join(c.value for c in at.sidebar.caption) + " ".join(
        w.value for w in at.sidebar.warning
    )
    assert "CPU only" in sidebar or "GPU" in sidebar
    assert "psutil" in sidebar or "NVML live" in " ".join(s.value for s in at.sidebar.success)
    assert at.info, "an empty store says how to get a first run"


def test_first_page_says_what_stepwise_does_and_offers_three_ways_in(store) -> None:
    at = open_page(None)
    assert_clean(at)
    assert at.title[0].value == "Stepwise"
    assert "names what limits its step time" in at.markdown[0].value
    labels = [p.proto.label for p in at.get("page_link")]
    assert labels[:3] == ["Launch a workload", "Profile my script", "Upload a trace"]


def test_runs_lists_runs_and_deletes_one(store) -> None:
    keep = fake_run(store, label="keep me")
    gone = fake_run(store, label="delete me")
    at = open_page()
    assert_clean(at)
    table = at.dataframe[0].value
    assert set(table["run"]) == {"keep me", "delete me"}
    at.selectbox(key="runs.pick").set_value(gone.run_id).run()
    at.checkbox(key="runs.confirm_delete").check().run()
    at.button(key="runs.delete").click().run()
    assert_clean(at)
    assert [r.run_id for r in store.list()] == [keep.run_id]


def test_the_runs_table_fits_and_never_says_none(store, shared_traces) -> None:
    """The dashboard walk: an upload's samples/s and peak MiB read a literal "None", and device, ranks, error
    and id were cut off on the right. Missing numbers read "—", every column has a width that fits the page
    (the id, hidden there, is under the picker)."""
    fake_run(store, label="with numbers")
    store.import_trace(
        shared_traces / "edge/hta_no_rank_info.json.gz"
    )  # an upload: no samples/s, no peak
    at = open_page()
    assert_clean(at)
    grid = at.dataframe[0]
    assert grid.proto.placeholder == "—"
    config = json.loads(grid.proto.columns)
    shown = [c for c in grid.value.columns if c != "id"]
    assert list(grid.proto.column_order) == shown
    widths = [config[c]["width"] for c in shown]
    # the main column at 1400 px holds ~940 px, the rows' selection boxes ~30 of them (a real browser showed the
    # error column cut off at 930)
    assert all(isinstance(w, int) for w in widths) and sum(widths) <= 905
    assert any(c.value.startswith("Run id: ") for c in at.caption)


def test_an_experiment_lists_its_trial_runs_and_one_opens_in_analysis(store) -> None:
    """The walk: trial runs were visible only from `stepwise list --all`. Selecting an experiment shows each
    trial with its part, in the order they ran, and a trial opens in Analysis by its link."""
    import time

    from profilers.store import experiments

    source = fake_run(store, label="source run")
    exp = experiments.start(
        store, source.run_id, "apply", "Apply DataLoader workers", {"fix": "dataloader_workers"}
    )
    parts = []
    for role, ms in (("baseline", 50.0), ("patched", 40.0), ("baseline", 51.0), ("patched", 41.0)):
        trial = fake_run(store, label="ab-data_bound", step_ms=ms)
        store.update(trial.run_id, parent=exp.run_id, role=role)
        parts.append((role, trial.run_id))
        time.sleep(0.01)
    experiments.finish(
        store,
        exp.run_id,
        {
            "mode": "apply",
            "fix_id": "dataloader_workers",
            "kept": True,
            "reason": "",
            "summary": {"speedup": 1.25},
        },
    )
    at = open_page()
    assert_clean(at)
    assert set(at.dataframe[0].value["run"]) == {
        "source run",
        "Apply DataLoader workers ← source run",
    }
    at.selectbox(key="runs.pick").set_value(exp.run_id).run()
    assert_clean(at)
    trials = at.dataframe[1].value
    assert list(zip(trials["part"], trials["id"])) == parts  # in the order they ran
    assert list(trials["ms/step"]) == [store.get(i).step_time_ms for _, i in parts]
    at.selectbox(key="runs.trial_pick").set_value(parts[1][1]).run()
    link = next(p for p in at.get("page_link") if p.proto.label == "Open it in Analysis")
    assert link.proto.query_string == f"run={parts[1][1]}", (parts, link.proto.query_string)
    at.query_params["run"] = parts[1][1]
    at.switch_page("views/analysis.py").run()
    assert_clean(at)
    assert at.selectbox(key="analysis.run").value == parts[1][1]


def test_a_watched_run_lists_its_captures_and_one_opens_in_analysis(store) -> None:
    """A watched run's captures were in neither the Runs list nor its pickers (reached by typing ``?run=``)."""
    record = fake_run(
        store, label="watched", kind="launch", files={"boot.json": {"watch": {"capture_steps": 3}}}
    )
    child = fake_capture(store, record)
    at = open_page("runs")
    at.selectbox(key="runs.pick").set_value(record.run_id).run()
    assert_clean(at)
    assert any(s.value == "Its captures (1)" for s in at.subheader)
    pick = at.selectbox(key="runs.capture_pick")
    assert pick.options == ["capture 1 (rank 0): step_time"]
    pick.set_value(child.run_id).run()
    assert_clean(at)
    assert any(p.label == "Open it in Analysis" for p in at.get("page_link"))


def test_a_watched_runs_analysis_says_its_steps_and_links_its_captures(store) -> None:
    """A watched run keeps no trace of its own (its captures do): its Analysis page says how many
    steps it measured at what time per step, never "no step time", and links each capture."""
    import shutil
    from pathlib import Path

    record = fake_run(
        store, label="watched", kind="launch", files={"boot.json": {"watch": {"capture_steps": 3}}}
    )
    shutil.rmtree(Path(record.run_dir) / "tb")
    child = fake_capture(store, record)
    at = open_page("runs")
    at.query_params["run"] = record.run_id
    at.switch_page("views/analysis.py").run()
    assert_clean(at)
    said = " ".join(m.value for m in at.markdown) + " ".join(i.value for i in at.info)
    assert "steps measured" in said and "ms per step" in said, said
    assert "No step time to attribute" not in said
    assert "profiled itself in 1 capture(s)" in said, said
    links = [p.proto for p in at.get("page_link") if p.proto.label.startswith("Capture 1")]
    assert [p.query_string for p in links] == [f"run={child.run_id}"], links
