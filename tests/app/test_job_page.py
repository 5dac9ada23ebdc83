"""The Job page: a folder of ranks as heat maps, the straggler and its victims (or why no rank is marked), the
critical path of the rank of most work in words and how it fits the bottleneck, and one rank opened alone."""

from __future__ import annotations

from pathlib import Path

from profilers.store.runs import RunStore
from profilers.jobs.critical_graph import KIND_WORDS
from tests.app.conftest import assert_clean, open_page
from tests.job_factory import STRAGGLER, planted_job

JOB = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "traces"
    / "communication"
    / "param_dlrm_8_ranks"
)


def test_the_job_page_shows_the_heat_maps_and_why_no_rank_is_marked_and_opens_one_rank(
    store: RunStore, monkeypatch
) -> None:
    """dlrm: one step per rank, rank 5 works as long as rank 4 within the spread among the ranks: no straggler,
    said in the sentence every page says; rank 5's critical path in words, and how it fits the communication
    bottleneck."""
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(JOB)).run()
    assert_clean(at)
    assert not at.warning and any(
        i.value.startswith("Rank 5 does the most work") and "no rank is marked" in i.value
        for i in at.info
    )
    assert (
        at.selectbox(key="job.rank").value == 5
    )  # the rank of most work, whose critical path is shown, first
    assert {m.label: m.value for m in at.metric}["Ranks"] == "8"
    assert any(
        "sets this rank's step" in c.value for c in at.caption
    )  # rank 5's critical path, rendered
    assert any(
        i.value.startswith("Communication is the bottleneck because")
        and "rank 5's own critical path" in i.value
        for i in at.info
    )  # the bottleneck and the path, reconciled
    top = next(d.value for d in at.dataframe if list(d.value.columns) == ["kind", "name", "ms"])
    assert (
        top["ms"].is_monotonic_decreasing
        and len(top)
        and set(top["kind"]) <= set(KIND_WORDS.values())
    )
    at.button(key="job.open").click().run()
    assert_clean(at)
    [record] = store.list()
    assert record.kind == "upload" and record.label.endswith("rank 5")
    assert [p.name for p in (Path(record.run_dir) / "trace").rglob("*.json.gz")] == [
        "worker5.pt.trace.json.gz"
    ]


def test_the_job_page_says_what_each_kind_of_collective_moved(store: RunStore, monkeypatch) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(JOB.parent / "hta_sampled_128_ranks")).run()
    assert_clean(at)
    sizes = next(d.value for d in at.dataframe if "mean message MB" in d.value.columns)
    allreduce = sizes[sizes["kind"] == "allreduce"].iloc[0]
    assert allreduce["calls"] == allreduce["sized"] > 0 and 70 < allreduce["mean message MB"] < 80
    assert any(
        "record_shapes=True" in c.value for c in at.caption
    )  # the all_to_all calls not all sized


def test_the_job_page_names_a_planted_straggler_and_where_its_extra_time_goes(
    store: RunStore, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(planted_job(tmp_path / "job"))).run()
    assert_clean(at)
    [warning] = at.warning
    assert (
        warning.value.startswith(f"Straggler: rank {STRAGGLER} works ")
        and "3 rank(s) wait on it" in warning.value
    )
    assert at.selectbox(key="job.rank").value == STRAGGLER
    assert any(f"Where rank {STRAGGLER}'s extra time goes" in m.value for m in at.markdown)


def test_a_second_look_says_its_summaries_came_from_the_cache(
    store: RunStore, tmp_path: Path, monkeypatch
) -> None:
    """Issue 42: the Job page said "0 from the cache" on the second look (it showed the first look's count)."""
    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", str(tmp_path / "summaries"))
    folder = str(planted_job(tmp_path / "job"))

    def look() -> str:
        at = open_page("job")
        at.text_input(key="job.folder").set_value(folder).run()
        assert_clean(at)
        return next(c.value for c in at.caption if "rank summaries" in c.value)

    first, second = look(), look()
    n = int(first.split()[0])
    assert first == f"{n} rank summaries, 0 from the cache."
    assert second.startswith(f"{n} rank summaries, all {n} from the cache")


def test_an_opened_rank_shows_its_step_time_in_the_runs_list(store: RunStore, monkeypatch) -> None:
    """Issue 42: an imported rank showed "—" for ms/step in Runs while Analysis said 17.8 ms. A rank opened from
    the Job page goes through the upload's door: analysed, stored with its figures, never stored twice."""
    from advisors.analysis.stored import ANALYSIS_FILE

    monkeypatch.setenv("STEPWISE_SUMMARY_CACHE", "off")
    at = open_page("job")
    at.text_input(key="job.folder").set_value(str(JOB)).run()
    at.button(key="job.open").click().run()
    assert_clean(at)
    shown = {m.label: m.value for m in at.metric}["Median step"]
    [record] = store.list()
    assert record.step_time_ms is not None and f"{record.step_time_ms:.1f} ms" == shown == "17.8 ms"
    assert record.device == "cuda" and record.world_size == 1
    # the stored analysis gone stale (a newer Stepwise): the list still shows the run's own figure, not "—"
    (Path(record.run_dir) / ANALYSIS_FILE).unlink()
    runs = open_page("runs")
    assert_clean(runs)
    row = next(d.value for d in runs.dataframe if "ms/step" in d.value.columns).iloc[0]
    assert f"{row['ms/step']:.1f} ms" == shown
    again = open_page("job")  # the same rank opened again: the stored one, not a second copy
    again.text_input(key="job.folder").set_value(str(JOB)).run()
    again.button(key="job.open").click().run()
    assert_clean(again)
    assert [r.run_id for r in store.list()] == [record.run_id]


def test_a_watched_run_shows_each_ranks_step_time_and_work_over_the_run_with_its_captures(
    store: RunStore,
) -> None:
    """stepwise watch -- torchrun …: every rank's wall is the same, rank 1's own work rises at step 40; the chart
    draws both ranks in both panels and shades the capture of rank 1 and its neighbour, its trigger said."""
    import json

    parent = store.create(
        "launch", "ddp_train.py", files={"boot.json": {"watch": {"capture_steps": 3}}}
    )
    run_dir = Path(parent.run_dir)
    (run_dir / "steps.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "rank": r,
                    "step": s,
                    "wall_ms": 40.0,
                    "backward_ms": 30.0 - (20.0 if r == 1 and s >= 40 else 0),
                    "profiled": 70 <= s <= 77,
                }
            )
            + "\n"
            for s in range(100)
            for r in (0, 1)
        )
    )
    reason = "rank 1 behind the others by +25% for 10 steps (its work 30.0 ms a step against …)"
    for rank, n in ((1, 1), (0, 1)):
        folder = run_dir / "captures" / f"r{rank}c{n:03d}"
        folder.mkdir(parents=True)
        (folder / "capture.json").write_text(
            json.dumps(
                {
                    "n": n,
                    "rank": rank,
                    "steps": [70, 77],
                    "status": "done",
                    "started_unix": 1.0 + rank,
                    "trigger": {
                        "kind": "rank_behind",
                        "step": 52,
                        "reason": reason,
                        "numbers": {"rank": 1.0},
                    },
                    "job": {"id": "rank_behind-52", "ranks": [0, 1]},
                }
            )
        )
    at = open_page("job")
    at.text_input(key="job.run").set_value(parent.run_id).run()
    assert_clean(at)
    [fig] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Ranks over the run" in c.proto.spec
    ]
    lines = [(t["name"], t.get("yaxis", "y")) for t in fig["data"]]
    assert sorted(lines) == [("rank 0", "y"), ("rank 0", "y2"), ("rank 1", "y"), ("rank 1", "y2")]
    work = {t["name"]: t["y"] for t in fig["data"] if t.get("yaxis") == "y2"}
    assert (
        work["rank 1"][39] == 10.0 and work["rank 1"][40] == 30.0 and set(work["rank 0"]) == {10.0}
    )
    bands = [(s["x0"], s["x1"]) for s in fig["layout"]["shapes"] if s.get("type") == "rect"]
    assert bands == [(69.5, 77.5)] * 2  # one capture of both ranks, shaded in both panels
    assert any(a["text"] == "rank_behind · rank 1, 0" for a in fig["layout"]["annotations"])
    assert any(c.value.startswith("Steps 70–77: rank 1 behind the others") for c in at.caption)
    # the ranks over the whole run, reduced as watch --json's ranks: rank 1's work rose for 60% of the run, so its
    # own spread is as wide as its lead and the one straggler rule marks no rank (said, as the CLI says it)
    from profilers.run.rank_timeline import reduce_ranks

    reduced = reduce_ranks(run_dir)
    assert reduced is not None and [r.median_work_ms for r in reduced.ranks] == [10.0, 30.0]
    said = [m.value for m in [*at.info, *at.warning] if m.value.startswith("Over the whole run: ")]
    assert said == [f"Over the whole run: {reduced.reason}"]
    [table] = [d.value for d in at.dataframe if "median own work ms" in d.value.columns]
    assert table["rank"].tolist() == [0, 1] and table["median own work ms"].tolist() == [10.0, 30.0]
