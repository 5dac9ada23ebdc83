"""The Job page: a folder of ranks as heat maps, the straggler and its victims, the slowest rank's critical path,
and one rank opened alone."""

from __future__ import annotations

from pathlib import Path

from profilers.store.runs import RunStore
from tests.app.conftest import assert_clean, open_page

JOB = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "communication" / "param_dlrm_8_ranks"


def test_the_job_page_shows_the_heat_maps_and_the_straggler_and_opens_one_rank(store: RunStore,
                                                                                monkeypatch) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(JOB)).run()
    assert_clean(at)
    assert any("Straggler: rank 5" in w.value for w in at.warning)
    assert at.selectbox(key="job.rank").value == 5  # the straggler's rank is offered first
    assert any("Where rank 5's extra time goes" in m.value for m in at.markdown)
    assert {m.label: m.value for m in at.metric}["Ranks"] == "8"
    assert any("sets this rank's step" in c.value for c in at.caption)  # rank 5's critical path, rendered
    top = next(d.value for d in at.dataframe if list(d.value.columns) == ["kind", "name", "ms"])
    assert top["ms"].is_monotonic_decreasing and len(top)
    at.button(key="job.open").click().run()
    assert_clean(at)
    [record] = store.list()
    assert record.kind == "upload" and record.label.endswith("rank 5")
    assert [p.name for p in (Path(record.run_dir) / "trace").rglob("*.json.gz")] == ["worker5.pt.trace.json.gz"]


def test_the_job_page_says_what_each_kind_of_collective_moved(store: RunStore, monkeypatch) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(JOB.parent / "hta_sampled_128_ranks")).run()
    assert_clean(at)
    sizes = next(d.value for d in at.dataframe if "mean message MB" in d.value.columns)
    allreduce = sizes[sizes["kind"] == "allreduce"].iloc[0]
    assert allreduce["calls"] == allreduce["sized"] > 0 and 70 < allreduce["mean message MB"] < 80
    assert any("record_shapes=True" in c.value for c in at.caption)  # the all_to_all calls not all sized
