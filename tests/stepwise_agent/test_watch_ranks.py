"""The agent's side of the rank watch (stepwise_agent/watch.py): every step records its time inside backward;
a request of the runner's rank watch names the ranks that capture and the step they start at, and its trigger
and job go into each rank's capture.json (the runner stores the ranks' captures of one request as one run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from profilers.run.captures import capture_records
from stepwise_agent import boot

SCRIPT = """
import json, time
import torch
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(150):
    if step == 20:  # what the runner's rank watch writes, from outside: read at the next flush (1 s, < 80 steps)
        open(REQUEST, "w").write(json.dumps(ASK))
    loss = model(torch.randn(16, 64)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.015)
"""
TRIGGER = {
    "kind": "rank_behind",
    "step": 18,
    "reason": "rank 0 behind the others by +30% for 10 steps",
    "numbers": {"rank": 0.0},
}


@pytest.fixture
def agent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)

    def run(ask: dict) -> Path:
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        # per_hour 0: no rule of the agent's own may capture; the runner's request is captured whatever its limit
        (run_dir / "boot.json").write_text(
            json.dumps({"watch": {"capture_steps": 3, "per_hour": 0}})
        )
        source = SCRIPT.replace("REQUEST", repr(str(run_dir / "capture.request"))).replace(
            "ASK", repr(ask)
        )
        (tmp_path / "train.py").write_text(source)
        assert boot.main([str(run_dir), "3", str(tmp_path / "train.py")]) == 0
        return run_dir

    return run


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]


def test_every_step_records_its_time_inside_backward(agent) -> None:
    rows = _rows(agent({"steps": 2, "ranks": [1], "at_step": 40, "trigger": TRIGGER, "job": "j"}))
    assert len(rows) == 150 and all(0 < r["backward_ms"] < r["wall_ms"] for r in rows)


def test_a_request_for_other_ranks_is_not_this_ranks(agent) -> None:
    run_dir = agent({"steps": 2, "ranks": [1], "at_step": 40, "trigger": TRIGGER, "job": "j"})
    assert capture_records(run_dir) == [] and not any(r["profiled"] for r in _rows(run_dir))


def test_a_rank_behind_request_starts_at_its_step_with_its_trigger_and_job(agent) -> None:
    run_dir = agent(
        {"steps": 8, "ranks": [0, 1], "at_step": 100, "trigger": TRIGGER, "job": "rank_behind-18"}
    )
    [record] = capture_records(run_dir)
    assert (
        record["trigger"]["kind"] == "rank_behind"
        and record["trigger"]["reason"] == TRIGGER["reason"]
    )
    assert record["steps"] == [101, 108]  # from the step asked: step 100 the profiler's warm-up
    capture = json.loads(next((run_dir / "captures").glob("*/capture.json")).read_text())
    assert capture["job"] == {"id": "rank_behind-18", "ranks": [0, 1]}
    assert [r["step"] for r in _rows(run_dir) if r["profiled"]] == list(range(101, 109))


@pytest.mark.slow
def test_a_request_that_comes_while_a_capture_runs_is_acted_on_after_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A rank watch's request read while the rank profiles its own capture (on a busy host both ranks' step-time
    rule fires first) waits for that capture's end; it was dropped, and the job's rank capture never came."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "boot.json").write_text(json.dumps({"watch": {"capture_steps": 3, "per_hour": 0}}))
    ask = {"steps": 4, "ranks": [0], "at_step": 0, "trigger": TRIGGER, "job": "rank_behind-18"}
    source = f"""
import json, os, time
import torch
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
asked = False
for step in range(400):
    if step == 5:  # an on-demand capture of 80 steps (over a second: the writer thread reads requests twice a second)
        open({str(run_dir / "capture.request")!r}, "w").write(json.dumps({{"steps": 80}}))
    if not asked and os.path.isdir({str(run_dir / "captures" / "r0c001")!r}):  # it began: the rank watch asks now
        open({str(run_dir / "capture.request")!r}, "w").write(json.dumps({ask!r}))
        asked = True
    loss = model(torch.randn(16, 64)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.015)
"""
    (tmp_path / "train.py").write_text(source)
    assert boot.main([str(run_dir), "3", str(tmp_path / "train.py")]) == 0
    first, second = capture_records(run_dir)
    assert first["trigger"]["kind"] == "on_demand" and second["trigger"]["kind"] == "rank_behind"
    assert second["steps"][0] > first["steps"][1] and second["steps"][1] - second["steps"][0] == 3
