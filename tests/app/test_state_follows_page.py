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


def test_a_stale_link_gets_no_such_run_never_another_run(store) -> None:
    fake_run(store, label="only run")
    at = open_page()
    at.query_params["run"] = "20990101-000000-gone-0000"
    at.run()
    assert_clean(at)
    assert at.title[0].value == "No such run"
    assert "20990101-000000-gone-0000" in at.error[0].value
    assert not at.selectbox and not at.metric and not at.dataframe  # nothing of "only run" is shown


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


def test_a_reload_reattaches_the_launch_live_view(store) -> None:
    running = store.create(
        "run", "still training", {"workload": "data_bound", "params": {"size": "tiny"}}
    )
    at = open_page()
    at.query_params["follow"] = running.run_id
    at.switch_page("views/launch.py").run()
    assert_clean(at)
    assert at.subheader[0].value == "Live"


def test_a_running_experiment_reattaches_on_its_runs_advisor(store) -> None:
    from advisors.experiments.progress import Progress
    from profilers.store import experiments

    source = fake_run(store, label="source")
    exp = experiments.start(
        store, source.run_id, "apply", "Apply x on source", {"fix": "dataloader_workers"}
    )
    experiments.write_progress(
        store,
        exp.run_id,
        Progress("trial", arm="baseline", trial=1, trials=2, step=3, total_steps=10).to_dict(),
    )
    at = open_page()
    at.query_params["run"] = source.run_id
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    bars = [p.proto.text for p in at.get("progress")]
    assert any("baseline run 1 of 2 · step 3 of 10" in b for b in bars), bars
    assert at.button(key="advisor.apply").disabled  # one experiment at a time on this run
