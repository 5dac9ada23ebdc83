"""``stepwise watch``'s command reading and ``stepwise capture``'s request (fast lane): a torchrun command becomes
ranks of the one run path, a verdict line says trigger, steps and cause, and a capture request reaches only a
watched run that is still running."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli.watch import torchrun_split, verdict
from profilers.errors import RunError, StepwiseError
from profilers.run.captures import REQUEST_FILE, request_capture
from profilers.run.records import RunResult, RunStatus
from profilers.store.runs import RunStore


def test_a_torchrun_command_becomes_its_ranks_and_a_python_command() -> None:
    assert torchrun_split(["--", "torchrun", "--nproc_per_node", "2", "train.py", "--lr", "1"]) == (
        ["python", "train.py", "--lr", "1"],
        2,
        1,
        None,
    )
    assert torchrun_split(
        [
            "/env/bin/torchrun",
            "--nproc-per-node=4",
            "--nnodes=2",
            "--rdzv-endpoint",
            "h:29400",
            "train.py",
        ]
    ) == (["/env/bin/python", "train.py"], 4, 2, "h:29400")
    assert torchrun_split(["python", "train.py"]) == (["python", "train.py"], 1, 1, None)
    with pytest.raises(StepwiseError, match="no script"):
        torchrun_split(["torchrun", "--standalone"])


def test_the_verdict_line_says_the_trigger_the_steps_and_the_cause() -> None:
    capture = {
        "steps": [4251, 4253],
        "rank": 0,
        "trigger": {"kind": "step_time", "step": 4210, "reason": "step time +38% for 8 steps"},
    }
    binding = SimpleNamespace(message="the loader waits on decoding")
    analysis = SimpleNamespace(
        diagnosis=SimpleNamespace(bottleneck=SimpleNamespace(value="data"), binding=binding)
    )
    assert verdict(capture, analysis) == (
        "data",
        "step 4,210: step time +38% for 8 steps; captured steps "
        "4,251–4,253: data — the loader waits on decoding",
    )
    bottleneck, line = verdict(
        {**capture, "rank": 1}, SimpleNamespace(diagnosis=None, advisor_note="no trace")
    )
    assert bottleneck is None and line.endswith("captured steps 4,251–4,253 on rank 1: no trace")


def test_a_capture_request_reaches_only_a_running_watched_run(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    watched = store.create(
        "launch", "train.py", files={"boot.json": {"watch": {"capture_steps": 3}}}
    )
    plain = store.create("launch", "train.py", files={"boot.json": {"warmup": 1}})
    with pytest.raises(RunError, match="not a watched run"):
        request_capture(store, plain.run_id)
    path = request_capture(store, watched.run_id, steps=5)
    assert (
        path == Path(watched.run_dir) / REQUEST_FILE and json.loads(path.read_text())["steps"] == 5
    )
    store.finish(watched.run_id, RunResult(RunStatus.OK))
    with pytest.raises(RunError, match="has ended"):
        request_capture(store, watched.run_id)
