"""State follows the page (issue 12.3): every page has a path, ``?run=<id>`` opens that run, a clicked row is the
selected run, and the fix selector belongs to the run it is drawn for."""

from __future__ import annotations

from tests.app.conftest import assert_clean, fix_selector, open_page
from tests.app.fake_runs import fake_run


def test_root_hands_over_to_runs_with_its_query(store) -> None:
    old = fake_run(store, label="older")
    fake_run(store, label="newer")
    at = open_page()
    at.query_params["run"] = old.run_id
    at.run()
    assert_clean(at)
    assert at.title[0].value == "Runs"
    assert at.selectbox(key="runs.pick").value == old.run_id


def test_a_deep_link_opens_its_run_on_analysis(store) -> None:
    old = fake_run(store, label="linked run")
    fake_run(store, label="newest run")
    at = open_page()
    at.query_params["run"] = old.run_id
    at.switch_page("views/analysis.py").run()
    assert_clean(at)
    assert at.selectbox(key="analysis.run").value == old.run_id
    assert at.query_params["run"] == [old.run_id] or at.query_params["run"] == old.run_id


def test_a_stale_link_is_ignored(store) -> None:
    newest = fake_run(store, label="only run")
    at = open_page()
    at.query_params["run"] = "20990101-000000-gone-0000"
    at.run()
    assert_clean(at)
    assert at.selectbox(key="runs.pick").value == newest.run_id


def test_a_pick_sticks_and_is_shared_by_pages(store) -> None:
    first = fake_run(store, label="first")
    fake_run(store, label="second")
    at = open_page()
    at.selectbox(key="runs.pick").set_value(first.run_id).run()
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    assert at.selectbox(key="advisor.run").value == first.run_id


def test_the_fix_selector_follows_the_run(store) -> None:
    a = fake_run(store, label="run a")
    b = fake_run(store, label="run b")
    at = open_page("advisor")
    assert_clean(at)
    shown = at.selectbox(key="advisor.run").value
    assert fix_selector(at).key == f"advisor.fix.{shown}"
    other = a.run_id if shown == b.run_id else b.run_id
    at.selectbox(key="advisor.run").set_value(other).run()
    assert_clean(at)
    assert fix_selector(at).key == f"advisor.fix.{other}"
