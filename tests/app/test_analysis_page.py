"""Analysis page: every panel renders for an upload, a multi-rank upload and a stored run with telemetry."""

from __future__ import annotations

import pytest

import json
from pathlib import Path

from tests.app.conftest import assert_clean, open_page
from tests.app.fake_runs import fake_run


def test_upload_analysis_panels(store, shared_traces) -> None:
    run = store.import_trace(shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz")
    at = open_page("analysis")
    assert_clean(at)
    assert at.selectbox(key="analysis.run").value == run.run_id
    assert len(at.tabs) == 6
    for tab in ("Timeline", "Telemetry & memory", "Ranks"):
        at.session_state["stepwise.analysis_tab"] = tab
        at.run()
        assert_clean(at)
    at.session_state["stepwise.analysis_tab"] = "Kernels & operators"
    at.run()
    assert len(at.dataframe) == 2  # kernels and operators
    at.text_input(key="analysis.filter").set_value("conv").run()
    assert_clean(at)
    assert all("conv" in n.lower() for n in at.dataframe[0].value["kernel"])


@pytest.mark.slow
def test_multi_rank_upload_shows_ranks_and_straggler(store, shared_traces) -> None:
    store.import_trace(shared_traces / "communication/param_dlrm_8_ranks")
    at = open_page("analysis")
    assert_clean(at)
    at.selectbox(key="analysis.rank_breakdown").set_value(3).run()
    at.session_state["stepwise.analysis_tab"] = "Timeline"
    at.run()
    at.selectbox(key="analysis.rank_timeline").set_value(5).run()
    at.session_state["stepwise.analysis_tab"] = "Ranks"
    at.run()
    assert_clean(at)
    # One step per rank: the spread of a rank's steps is unknown, so no rank is marked and the page says why.
    assert any("step-to-step noise cannot be measured" in c.value for c in at.caption)
    labels = {
        k: v.get("label")
        for k, v in __import__("json").loads(at.dataframe[0].proto.columns).items()
    }
    assert (
        labels["step_ms"] == "median step (ms)"
        and labels["exposed_comm_ms"] == "exposed communication (ms)"
    )


def test_stored_run_with_telemetry(store) -> None:
    fake_run(store)
    at = open_page("analysis")
    at.session_state["stepwise.analysis_tab"] = "Telemetry & memory"
    at.run()
    assert_clean(at)
    assert not at.error
    assert any("Host telemetry" in c.value for c in at.caption)
    steady = [c.value for c in at.caption if c.value.startswith("During the steady steps:")]
    assert (
        steady and "host at 10.0 Hz" in steady[0]
    )  # the run's telemetry summary, as analyze prints it


def test_unreadable_upload_says_so(store, tmp_path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{}")
    store.import_trace(
        bad
    )  # imported behind the page's back: the page must still explain, not crash
    at = open_page("analysis")
    assert_clean(at)
    assert at.error and "cannot be analysed" in at.error[0].value


def test_a_cpu_run_says_it_has_no_gpu_kernels_instead_of_an_empty_table(store) -> None:
    """The dashboard walk: a CPU run's "Kernels & operators" tab drew an empty GPU-kernel table ("empty")
    above its operators. It says why there are none and shows the operator table alone."""
    from app.widgets.analysis_panels import NO_KERNELS_CPU

    fake_run(store)
    at = open_page("analysis")
    at.session_state["stepwise.analysis_tab"] = "Kernels & operators"
    at.run()
    assert_clean(at)
    assert len(at.dataframe) == 1 and "operator" in at.dataframe[0].value.columns
    assert NO_KERNELS_CPU in [c.value for c in at.caption]


def test_a_run_that_carried_the_noise_scale_meter_shows_its_goodput_numbers(store) -> None:
    """A --to-quality arm's run folder holds the meter's rows: the Analysis page shows B_simple, the critical batch
    and the statistical efficiency (batch 16 from its spec); the goodput-best batch needs a probe: "—"."""
    from pathlib import Path

    rec = fake_run(store)
    g2, trace = 1.0, 160.0  # B_simple = 160 samples at batch 16
    rows = [
        {
            "window": 4,
            "gap": 4,
            "sq_small": g2 + trace / 16,
            "sq_big": g2 + trace / 64,
            "hook_s": 0.001,
            "wall_s": 0.2,
        }
        for _ in range(10)
    ]
    (Path(rec.run_dir) / "noise_scale.jsonl").write_text(
        "".join(__import__("json").dumps(r) + "\n" for r in rows)
    )
    at = open_page("analysis")
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Gradient noise scale B_simple"] == "160"
    assert metrics["Critical batch (≈ B_noise)"] == "160"
    assert metrics["Statistical efficiency now"] == "91%"  # 160 / (160 + 16)
    assert metrics["Goodput-best batch"] == "—"


def test_a_gpu_trace_without_its_model_offers_a_picker_for_mfu_kept_in_the_address(
    store, tmp_path
) -> None:
    """No deviceProperties: MFU is unknown until the user names the GPU; the pick goes to ``?gpu=`` and the
    Device card names the architecture the kernel names show."""
    from tests.trace_factory import kernel, step, write, x

    ev: list[dict] = []
    for i in range(3):
        t = i * 10_000
        ev += [
            step(i, t, 10_000),
            x(
                "aten::mm",
                t + 10,
                200,
                **{"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["float", "float"]},
            ),
            kernel("volta_sgemm_128x64_nn", t + 300, 9_000),
        ]
    store.import_trace(write(tmp_path / "volta.json", ev))
    at = open_page("analysis")
    assert_clean(at)
    # the name in the metric, its basis in full beneath it: a long value is cut off in a metric
    assert at.metric[0].value == "Volta GPU"
    assert any(c.value == "(inferred from kernel names)" for c in at.caption)
    picker = at.selectbox(key="analysis.gpu_model")
    assert "Volta GPU" in picker.label and picker.value is None
    assert any("MFU unknown" in c.value and "name its model" in c.value for c in at.caption)
    picker.set_value("V100 SXM2").run()
    assert_clean(at)
    assert at.query_params["gpu"] in ("V100 SXM2", ["V100 SXM2"])
    mfu = next(c.value for c in at.caption if c.value.startswith("MFU"))
    assert "V100 SXM2, fp32" in mfu and "the model you picked" in mfu


def test_a_spec_change_is_offered_for_a_spec_run_only(store, shared_traces) -> None:
    """The same data-bound trace: a run of a spec shows "As a spec change: …"; a launched script (no spec) and
    an upload do not (issue 33: "As a spec change" on a script)."""
    trace = shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
    captions = {}
    for kind in ("run", "cuda run", "launch", "upload"):
        for r in store.list():
            store.delete(r.run_id)
        if kind == "upload":
            store.import_trace(trace)
        else:
            fake_run(
                store,
                label=kind,
                trace=trace,
                kind=kind.split()[-1],
                files={"launch.json": {"argv": ["train.py"]}},
                device="cuda" if kind == "cuda run" else "cpu",
            )
        at = open_page("advisor")
        assert_clean(at)
        captions[kind] = [c.value for c in at.caption if c.value.startswith("As a spec change")]
    assert captions["run"] and not captions["launch"] and not captions["upload"]
    # the change as it would be applied on the run's device: pinned memory only where there is a GPU (issue 42)
    assert "num_workers = " in captions["run"][0] and "pin_memory" not in " ".join(captions["run"])
    assert "pin_memory = True" in " ".join(captions["cuda run"])


def test_an_upload_of_many_ranks_is_read_from_their_summaries(
    store, shared_traces, monkeypatch
) -> None:
    """Issue 32: from SUMMARY_RANKS rank files on (16; 2 here), an upload's pages read the ranks' summaries, never
    every rank's events: the same step time, ranks and bottleneck as a whole load, the Timeline tab and the
    Events page say the events are per rank and link to the Job page with the folder."""
    from advisors.diagnosis import diagnose
    from advisors.observation import observe
    from advisors.analysis import build
    from app import data

    monkeypatch.setattr(data, "SUMMARY_RANKS", 2)
    monkeypatch.setattr(build, "SUMMARY_RANKS", 2)
    record = store.import_trace(shared_traces / "communication/param_dlrm_8_ranks")
    loaded: list[str] = []
    monkeypatch.setattr(data, "load_trace", lambda path: loaded.append(path))  # must not be called
    at = open_page("analysis")
    assert_clean(at)
    whole = observe(shared_traces / "communication/param_dlrm_8_ranks")
    assert whole.breakdown is not None
    texts = [
        x.value
        for kind in (at.header, at.subheader, at.markdown, at.caption, at.info, at.warning)
        for x in kind
    ]
    assert {m.label: m.value for m in at.metric}[
        "Events"
    ] == "per rank"  # not "0": none were loaded
    for tab in ("Timeline", "Ranks"):
        at.session_state["stepwise.analysis_tab"] = tab
        at.run()
        assert_clean(at)
        if tab == "Timeline":
            assert any(
                "No timeline here: this job was read as 8 rank summaries" in i.value
                for i in at.info
            )
    assert any(f"{whole.breakdown.step_time_ms:.1f} ms" in str(m.value) for m in at.metric)
    assert any(f"Binding bottleneck: {diagnose(whole).bottleneck.value}" in t for t in texts)
    assert any("read as 8 rank summaries" in t for t in texts)
    at.switch_page("views/events.py").run()
    assert_clean(at)
    link = next(p for p in at.get("page_link") if p.proto.label == "Open the job")
    assert "folder=" in link.proto.query_string and record.run_id in link.proto.query_string
    for page in (
        "advisor",
        "report",
    ):  # every page that reads the analysis takes one without a timeline
        at.switch_page(f"views/{page}.py").run()
        assert_clean(at)
    folder = str(data.trace_source(record))
    at.query_params["folder"] = folder
    at.switch_page("views/job.py").run()
    assert_clean(at)
    assert at.text_input(key="job.folder").value == folder
    assert {m.label: m.value for m in at.metric}["Ranks"] == "8"
    assert loaded == []


def test_a_run_whose_ranks_wrote_summaries_shows_all_of_them_on_the_ranks_tab(store) -> None:
    """A run launched with ``--trace-ranks 0`` under two ranks: its trace holds rank 0 alone, but the Ranks tab
    reads both ranks' summaries (not "one rank"), names the straggler and draws its critical path."""
    record = fake_run(store)
    run_dir = Path(record.run_dir)
    (run_dir / "summaries").mkdir()
    for rank, work in (
        (0, 45_000),
        (1, 20_000),
    ):  # rank 0 works longest: the straggler, and the traced rank
        steps = [
            {"step": s, "step_us": 50_000, "work_us": work, "comm_us": 50_000 - work}
            for s in range(3)
        ]
        (run_dir / "summaries" / f"rank{rank}.json").write_text(
            json.dumps({"rank": rank, "steps": steps})
        )
    at = open_page("analysis")
    at.session_state["stepwise.analysis_tab"] = "Ranks"
    at.run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ranks"] == "2" and metrics["With a trace"] == "1"
    assert not any("One rank" in i.value for i in at.info)
    assert any("Straggler: rank 0" in w.value for w in at.warning)
    assert any("rank 0 kept a full trace" in c.value for c in at.caption)
    assert any(m.label == "Ranks × steps" and m.value == "2 × 3" for m in at.metric)
    assert any(
        "chain of dependent work" in c.value for c in at.caption
    )  # the critical path, from the loaded trace


def test_the_advisor_page_shows_the_fix_order_the_cli_prints(store, shared_traces) -> None:
    """Issue 42: the CLI's ranking put dataloader_workers first with its effort; the dashboard showed the verdict
    and tucked the rest under "Other findings" with no order. The page lists the same order, each fix with the
    bound its Apply would show."""
    from advisors.analysis import analyse

    trace = shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz"
    record = store.import_trace(trace)
    at = open_page("advisor")
    assert_clean(at)
    order = next(m.value for m in at.markdown if m.value.startswith("**Fix order**"))
    a = analyse(record.run_dir)
    want = a.to_json()["ranking"]["fix_order"]
    items = [line for line in order.splitlines() if line[:1].isdigit()]
    assert (
        len(items) == len(want)
        and "**DataLoader worker processes**" in items[0]
        and "effort: keyword" in items[0]
    )
    first = next(f for f in a.diagnosis.findings if f.fix_id == want[0]["fix"])
    assert f"up to {a.bound_of(first).speedup:.2f}×" in items[0]


def test_a_captures_analysis_says_which_rule_made_it_and_the_rise_it_saw(store) -> None:
    """A watched run's capture is headed by its own bottleneck; beneath it, the rule that fired and its rise (two
    captures of one slowdown read alike otherwise)."""
    trigger = {
        "kind": "step_time",
        "step": 252,
        "reason": "step time +91% for 13 steps (2.0 s) (80.1 → 153.2 ms, beyond its noise of ±9.0 ms)",
    }
    capture = {"n": 1, "rank": 0, "steps": [254, 256], "status": "done", "trigger": trigger}
    child = fake_run(
        store, label="watched · capture 1", kind="launch", files={"capture.json": capture}
    )
    at = open_page("analysis")
    at.query_params["run"] = child.run_id
    at.run()
    assert_clean(at)
    said = [c.value for c in at.caption if c.value.startswith("Captured by the watch")]
    assert said and "step-time rule at step 252: step time +91%" in said[0], said
