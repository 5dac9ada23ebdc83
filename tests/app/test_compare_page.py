"""The Compare page shows the regression gate's verdict, the bottleneck before → after and what moved."""

from __future__ import annotations

import pytest

from profilers.run.records import RunStatus
from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_run

BEFORE = "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
AFTER = "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"


@pytest.fixture()
def pair(store, shared_traces):
    return store.import_trace(shared_traces / BEFORE), store.import_trace(shared_traces / AFTER)


def pick(at, a: str, b: str):
    at.selectbox(key="compare.a").set_value(a).run()
    return at.selectbox(key="compare.b").set_value(b).run()


def test_compare_opens_with_nothing_compared_until_the_user_picks(store, pair) -> None:
    at = open_page("compare")
    assert_clean(at)
    assert (
        at.selectbox(key="compare.a").value is None and at.selectbox(key="compare.b").value is None
    )
    assert not at.metric and not at.error and not at.success
    assert any(i.value.startswith("Pick the two runs") for i in at.info)
    pick(at, pair[0].run_id, pair[1].run_id)
    assert at.query_params["a"] in (pair[0].run_id, [pair[0].run_id])
    assert at.query_params["b"] in (pair[1].run_id, [pair[1].run_id])


def test_verdict_movers_and_downloads(store, pair) -> None:
    at = pick(open_page("compare"), pair[0].run_id, pair[1].run_id)  # A: workers=0, B: workers=4
    assert_clean(at)
    assert at.success and at.success[0].value.startswith("**Improvement**")
    assert any("**data** → **compute**" in m.value for m in at.markdown)
    # [0]: the environments of A and B
    moved = at.dataframe[1].value
    assert list(moved.columns) == ["kind", "name", "A ms", "B ms", "B − A ms"]
    assert moved.iloc[0]["name"] == "dataloader" and moved.iloc[0]["B − A ms"] < -50
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [
        "Download comparison (HTML)",
        "Download comparison (JSON)",
        "Download comparison (Markdown)",
    ]

    at.selectbox(key="compare.a").set_value(pair[1].run_id).run()
    at.selectbox(key="compare.b").set_value(pair[0].run_id).run()
    assert_clean(at)
    assert at.error and at.error[0].value.startswith("**Regression**")
    at.number_input(key="compare.max_slowdown").set_value(50.0).run()
    assert_clean(at)
    assert not at.error and any(i.value.startswith("**Same**") for i in at.info)


def test_a_failed_run_gets_no_verdict_but_its_charts(store, pair) -> None:
    broken = fake_run(store, "broken", status=RunStatus.FAILED)
    at = pick(open_page("compare"), pair[0].run_id, broken.run_id)
    assert_clean(at)
    assert any("No verdict" in w.value and "the run ended failed" in w.value for w in at.warning)
    assert at.metric  # the step times and charts still show


def test_the_verdict_speaks_of_a_and_b_and_states_its_numbers_once(store, pair) -> None:
    """The dashboard walk read "(ratio B / A 0.718 · 95% interval 0.681–0.979) — NEW's median step takes
    28.2% less time than BASE's (…; 95% interval of the ratio 0.681-0.979) … dataloader -58.75 ms per step … The
    category that moved most: dataloader (-58.08 ms per step)": the page's A and B, the interval once, and the
    two dataloader figures. Round 3 of real use read them as a contradiction (−58.75 / −58.08): a category the
    evidence already named with its median per step is not named again with its mean."""
    at = pick(open_page("compare"), pair[0].run_id, pair[1].run_id)
    assert_clean(at)
    said = at.success[0].value
    assert "NEW" not in said and "BASE" not in said and "B's time per step takes" in said
    assert said.count("95% interval") == 1
    assert said.count("dataloader") == 1 and "dataloader's median -" in said
    assert "moved most" not in said  # the same category, once


def test_what_moved_fits_the_page(store, pair) -> None:
    """Kernels and operators that moved: full-width tables in the page's column names (side by side, only the
    kernel name showed; the numbers were cut off on the right)."""
    import json

    at = pick(open_page("compare"), pair[0].run_id, pair[1].run_id)
    kernels, ops = at.dataframe[2], at.dataframe[3]
    for grid in (kernels, ops):
        assert list(grid.value.columns) == ["name", "A ms", "B ms", "B − A ms"]
        config = json.loads(grid.proto.columns)
        assert config["name"]["width"] == "large" and config["B − A ms"]["width"] == "small"
    assert kernels.value["B − A ms"].abs().max() > 0


def test_the_speed_up_card_is_coloured_only_when_the_verdict_decided(store, pair) -> None:
    """Issue 33: a red "0.67× ↓ −33%" card above the page's own "Inconclusive" verdict."""
    noisy_a = fake_run(store, label="noisy a", steps=3, step_ms=50.0)
    noisy_b = fake_run(store, label="noisy b", steps=3, step_ms=75.0)
    from streamlit.proto.Metric_pb2 import Metric

    seen: set[bool] = set()
    for a, b in ((pair[0].run_id, pair[1].run_id), (noisy_a.run_id, noisy_b.run_id)):
        at = pick(open_page("compare"), a, b)
        assert_clean(at)
        card = next(m for m in at.metric if m.label == "Speed-up of B")
        decided = bool(at.success) or bool(at.error)
        seen.add(decided)
        gray = card.proto.color == Metric.MetricColor.GRAY
        assert gray != decided  # red/green only under a regression/improvement verdict
        assert (
            "(" not in card.delta
        ) == decided  # the verdict's word in the card when it did not decide
    assert seen == {True, False}  # both cases were seen


def test_runs_whose_ranks_wrote_summaries_show_their_ranks(store) -> None:
    """Two ``--trace-ranks`` runs: each side's ranks, straggler and critical path, in the words ``compare``
    prints."""
    import json
    from pathlib import Path

    runs = []
    for label, slow in (("before", 45_000), ("after", 30_000)):
        record = fake_run(store, label=label)
        (Path(record.run_dir) / "summaries").mkdir()
        for rank, work in ((0, slow), (1, 20_000)):
            steps = [
                {"step": s, "step_us": 50_000, "work_us": work, "comm_us": 50_000 - work}
                for s in range(3)
            ]
            (Path(record.run_dir) / "summaries" / f"rank{rank}.json").write_text(
                json.dumps({"rank": rank, "steps": steps})
            )
        runs.append(record)
    at = pick(open_page("compare"), runs[0].run_id, runs[1].run_id)
    assert_clean(at)
    lines = [c.value for c in at.caption if c.value.startswith(("A ranks:", "B ranks:"))]
    assert lines[0].startswith(
        "A ranks: 2 (1 traced) · straggler rank 0 (45 ms of work, median 32.5)"
    )
    assert lines[1].startswith(
        "B ranks: 2 (1 traced) · straggler rank 0 (30 ms of work, median 25)"
    )
    assert "rank 0's critical path" in lines[0]


def test_a_link_to_a_trial_run_opens_it_as_analysis_does(store, pair) -> None:
    """Issue 42: ``?b=<trial run id>`` said "not in this run store: it was deleted" while Analysis opened the same
    id. A trial run a link names is offered; an id that names no run still gets "No such run"."""
    from profilers.store import experiments

    exp = experiments.start(
        store, pair[0].run_id, "apply", "Apply something", {"fix": "dataloader_workers"}
    )
    trial = store.import_trace(store.path(pair[1].run_id) / "trace" / AFTER.split("/")[1])
    store.update(trial.run_id, parent=exp.run_id, role="patched")
    assert trial.run_id not in {
        r.run_id for r in store.list(trials=False)
    }  # hidden from the run list
    at = open_page()
    at.query_params["a"], at.query_params["b"] = pair[0].run_id, trial.run_id
    at.switch_page("views/compare.py").run()
    assert_clean(at)
    assert not at.error and at.selectbox(key="compare.b").value == trial.run_id and at.metric
    gone = open_page()
    gone.query_params["a"], gone.query_params["b"] = pair[0].run_id, "20990101-000000-gone-0000"
    gone.switch_page("views/compare.py").run()
    assert gone.title[-1].value == "No such run"


def test_two_devices_are_said_first(store, tmp_path) -> None:
    from tests.cli.test_compare_environment import trace

    a = store.import_trace(trace(tmp_path / "a.json", "Tesla V100-SXM2-16GB", 8))
    b = store.import_trace(trace(tmp_path / "b.json", "NVIDIA A100-SXM4-40GB", 8))
    at = pick(open_page("compare"), a.run_id, b.run_id)
    assert_clean(at)
    assert at.warning[0].value == (
        "B ran on a different device (NVIDIA A100-SXM4-40GB vs "
        "Tesla V100-SXM2-16GB): this compares machines, not code"
    )
    (env,) = [d.value for d in at.dataframe if "differs" in d.value.columns]
    rows = {r[""]: r for r in env.to_dict("records")}
    assert rows["Device"]["A"] == "Tesla V100-SXM2-16GB" and rows["Device"]["differs"] == "yes"
    assert rows["World size"]["differs"] == "" and rows["Torch"]["A"] == "not recorded"


def test_one_device_says_nothing_of_it(store, pair) -> None:
    at = pick(open_page("compare"), pair[0].run_id, pair[1].run_id)
    assert not any("compares machines" in w.value for w in at.warning)
