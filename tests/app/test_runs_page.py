"""Entry script, sidebar and the Runs page."""

from __future__ import annotations

from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_run


def test_entry_renders_runs_page_and_states_telemetry(store) -> None:
    at = open_page()
    assert_clean(at)
    assert at.title[0].value == "Runs"
    sidebar = " ".join(c.value for c in at.sidebar.caption) + " ".join(w.value for w in at.sidebar.warning)
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
