"""The agent's watch mode in this process (fast lane): the script runs to its own end with every step recorded,
its exit code passed through, a capture fired when its batches get slow (the trace, ``capture.json`` with its
trigger and profiled steps, the profiled rows marked) and none for a steady script; the runner's side stores the
capture as a run of its own (:mod:`profilers.run.captures`). ``tests/cli/test_watch.py`` runs it for real."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cli import profilers as profilers_cli
from profilers.run.captures import capture_records, store_captures
from profilers.run.records import RunResult, RunStatus
from profilers.store.runs import RunStore
from stepwise_agent import boot
from stepwise_agent.trigger import RECENT

SLOWING = '''
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Later(Dataset):
    """Samples from step SLOW_FROM on take 3 ms each to read (a slower shard)."""
    def __len__(self):
        return 8 * STEPS
    def __getitem__(self, i):
        if i >= 8 * SLOW_FROM:
            time.sleep(0.003)
        return torch.ones(4), 0

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Later(), batch_size=8):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.015)  # the model's own work: long enough that a busy machine's jitter is not a shift
sys.exit(EXIT)
'''


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)

    def run(
        steps: int, slow_from: int, exit_code: int = 0, run_dir: Path | None = None
    ) -> tuple[int, Path]:
        if run_dir is None:
            run_dir = tmp_path / "run"
            run_dir.mkdir()
            (run_dir / "boot.json").write_text(json.dumps({"watch": {"capture_steps": 3}}))
        source = SLOWING.replace("STEPS", str(steps)).replace("SLOW_FROM", str(slow_from))
        (tmp_path / "train.py").write_text(source.replace("EXIT", str(exit_code)))
        return boot.main([str(run_dir), "3", str(tmp_path / "train.py")]), run_dir

    return run


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def test_a_script_runs_to_its_end_every_step_recorded_its_exit_code_passed_through(
    watch: Any, tmp_path: Path
) -> None:
    # captures held back (per_hour 0): a busy test machine's jitter may fire a rule, and this test is about the
    # recording; that a steady script captures nothing is tests/cli/test_watch.py's (run alone) and the rules' own
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "boot.json").write_text(json.dumps({"watch": {"capture_steps": 3, "per_hour": 0}}))
    code, run_dir = watch(100, 10_000, exit_code=3, run_dir=run_dir)
    assert code == 3  # the script's own sys.exit(3), passed through
    rows = _rows(run_dir)
    assert [r["step"] for r in rows] == list(range(100)) and not any(r["profiled"] for r in rows)
    assert all(r["data_ms"] is not None for r in rows)
    assert not (run_dir / "captures").exists()
    result = json.loads((run_dir / "agent_result.json").read_text())
    assert result["steps_done"] == 100 and result["profiled_then_stopped"] is None


@pytest.mark.slow
def test_slower_batches_fire_a_capture_that_the_runner_stores_as_a_run(
    watch: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "store")
    # watch --judged-s 0.5: the baseline is learnt by step ~160 (warm-up, 0.5 s of ~16-ms steps judged, MIN_BLOCKS
    # stretches as long), not ~630 as by default
    parent = store.create(
        "launch", "train.py", files={"boot.json": {"watch": {"capture_steps": 3, "judged_s": 0.5}}}
    )
    code, run_dir = watch(260, 200, run_dir=Path(parent.run_dir))
    assert code == 0
    rows = _rows(run_dir)
    assert [r["step"] for r in rows] == list(range(260))  # the script was never stopped
    records = capture_records(run_dir)
    assert len(records) == 1
    capture = records[0]
    assert capture["trigger"]["kind"] in ("data_share", "step_time") and capture["status"] == "done"
    # fired within the judged half second of ~40-ms steps (13 steps) and a little slack
    assert (
        200 <= capture["trigger"]["step"] <= 200 + 20 and "(0.5 s)" in capture["trigger"]["reason"]
    )
    first, last = capture["steps"]
    assert (first, last) == (capture["trigger"]["step"] + 2, capture["trigger"]["step"] + 4)
    assert [r["step"] for r in rows if r["profiled"]] == list(range(first, last + 1))
    assert [r["capture"] for r in rows if r["profiled"]] == [1, 1, 1]

    children = store_captures(
        store, parent.run_id
    )  # the runner's side, outside the training process
    assert len(children) == 1 and store_captures(store, parent.run_id) == children  # stored once
    child = store.get(children[0])
    assert child.parent == parent.run_id and child.role == "capture" and child.status.value == "ok"
    child_dir = store.path(children[0])
    assert list((child_dir / "tb").glob("rank0.*.pt.trace.json.gz"))
    # the steps the trigger judged (unprofiled: the capture's step time and telemetry are theirs), then the profiled
    judged = capture["trigger"]["step"] - int(capture["trigger"]["numbers"]["judged_steps"]) + 1
    assert judged <= capture["trigger"]["step"] - RECENT + 1
    assert [
        json.loads(line)["step"] for line in (child_dir / "steps.jsonl").read_text().splitlines()
    ] == list(range(judged, last + 1))
    assert (child_dir / "injected.json").is_file()  # the run's threads, for HOST004
    assert capture_records(run_dir)[0]["run_id"] == children[0]
    store.finish(parent.run_id, RunResult(RunStatus.OK))
    assert profilers_cli.main(["list", "--json", "--store", str(store.root)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [
        r["captures"][0]["run_id"] for r in listed
    ] == children  # the capture run itself only with --all


def test_a_capture_asked_for_starts_at_the_next_flush_whatever_the_rules(
    watch: Any, tmp_path: Path
) -> None:
    run_dir = tmp_path / "asked"
    run_dir.mkdir()
    (run_dir / "boot.json").write_text(json.dumps({"watch": {"capture_steps": 2, "per_hour": 0}}))
    source = SLOWING.replace("STEPS", "100").replace("SLOW_FROM", "10000").replace("EXIT", "0")
    ask = (
        f"    ASKED.append(1)\n    if len(ASKED) == 30:  # what stepwise capture RUN writes, from outside\n"
        f"        open({str(run_dir / 'capture.request')!r}, 'w').write('{{\"steps\": 2}}')\n"
    )
    source = source.replace("    time.sleep(0.015)", ask + "    time.sleep(0.015)").replace(
        "model = ", "ASKED = []\nmodel = "
    )
    (tmp_path / "asked.py").write_text(source)
    assert boot.main([str(run_dir), "2", str(tmp_path / "asked.py")]) == 0
    records = capture_records(run_dir)
    assert [c["trigger"]["kind"] for c in records] == [
        "on_demand"
    ]  # per_hour 0: no rule could have started it
    first, last = records[0]["steps"]
    assert last - first == 1 and first < 100


def test_the_memory_guard_cuts_a_capture_and_the_script_runs_on_without_more(
    tmp_path: Path,
) -> None:
    import torch

    from stepwise_agent.trigger import STEP_TIME, Fired
    from stepwise_agent.watch import WatchRecorder

    rec = WatchRecorder(tmp_path, capture_steps=3)
    rec.start()
    model = torch.nn.Linear(4, 2)
    for _ in range(3):
        model(torch.ones(4)).sum().backward()
        rec.on_step(1.0, 4)
    rec._fire(Fired(STEP_TIME, 2, "step time +50%"))
    rec.on_guard_signal()  # memory past the limit during the capture: cut it, do not stop the script
    for _ in range(3):
        model(torch.ones(4)).sum().backward()
        rec.on_step(1.0, 4)
    assert [c["status"] for c in rec.captures] == ["cut"] and rec.phase == "cut"
    assert (
        json.loads((tmp_path / "progress.json").read_text())["phase"] == "cut"
    )  # the runner's guard waits for it
    rec._fire(Fired(STEP_TIME, 6, "step time +50%"))
    assert (
        len(rec.captures) == 1
        and "no more captures" in (tmp_path / "watch_events.jsonl").read_text()
    )
    rec.stop()


@pytest.mark.slow
def test_a_memory_capture_is_judged_by_the_growth_its_trigger_measured(
    watch: Any, tmp_path: Path
) -> None:
    """Issue 44: a capture the memory rule fired was analysed as compute (three profiled steps show no trend).
    Its analysis now reads the agent's own numbers from ``capture.json`` and names memory (MEM008)."""
    from advisors.analysis import analyse
    from stepwise_agent.trigger import MEMORY, Fired

    store = RunStore(tmp_path / "store")
    parent = store.create(
        "launch", "train.py", files={"boot.json": {"watch": {"capture_steps": 3, "judged_s": 0.5}}}
    )
    watch(260, 200, run_dir=Path(parent.run_dir))
    (child,) = store_captures(store, parent.run_id)
    child_dir = store.path(child)
    assert (
        analyse(child_dir).diagnosis.bottleneck.value != "memory"
    )  # the data capture: no memory finding
    capture = json.loads((child_dir / "capture.json").read_text())
    fired = Fired(
        MEMORY,
        120,
        "memory +150 MiB over 50 steps, steadily",
        (
            ("grown_mb", 150.0),
            ("window_steps", 50.0),
            ("mb_per_step", 3.0),
            ("r2", 0.99),
            ("start_mb", 900.0),
            ("end_mb", 1050.0),
            ("limit_mb", 20000.0),
            ("steps_left", 6300.0),
        ),
    )
    (child_dir / "capture.json").write_text(json.dumps({**capture, "trigger": fired.to_json()}))
    (child_dir / "analysis.json").unlink(missing_ok=True)
    analysis = analyse(child_dir)
    assert analysis.diagnosis.bottleneck.value == "memory"
    (creep,) = [f for f in analysis.diagnosis.findings if f.rule == "MEM008"]
    assert "3.0 MiB a step" in creep.message and creep.evidence["steps_left"] == 6300.0


def test_the_floor_of_a_rise_is_the_host_cores_one_for_a_cpu_step_unless_given(
    tmp_path: Path,
) -> None:
    import torch

    from stepwise_agent.trigger import CPU_MIN_RISE, MIN_RISE, WARMUP_STEPS
    from stepwise_agent.watch import watch_recorder

    for cfg, expected in (({}, CPU_MIN_RISE), ({"min_rise": 0.1}, 0.1)):
        run_dir = tmp_path / str(len(cfg))
        run_dir.mkdir()
        rec = watch_recorder(run_dir, cfg, None, 0, True)
        rec.start()
        assert rec.trigger.min_rise == (
            MIN_RISE if not cfg else 0.1
        )  # chosen once the warm-up is over
        for _ in range(WARMUP_STEPS + 2):
            torch.nn.Linear(4, 2)(torch.ones(4)).sum().backward()
            rec.on_step(1.0, 4)
        assert rec.trigger.min_rise == expected
        rec.stop()
