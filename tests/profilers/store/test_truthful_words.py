"""Words that tell the truth (issue 12.7): a ``.gz`` that is not gzip says so; a run's steps summarised as a
typed value; the cancel marker a watcher reads."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from profilers.errors import TraceError
from profilers.run.records import RunResult, RunStatus, StepSummary, summarise_steps
from profilers.store.files import steps_frame, telemetry_frame
from profilers.store.runs import RunStore
from profilers.trace.load import load_trace


def test_random_bytes_named_gz_are_called_not_gzip(tmp_path: Path) -> None:
    path = tmp_path / "rank0.pt.trace.json.gz"
    path.write_bytes(b"\x00\x07" + os.urandom(200))
    with pytest.raises(TraceError, match="not gzip-compressed"):
        load_trace(path)


def test_plain_json_named_gz_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 10, "pid": 1, '
        '"tid": 1, "cat": "user_annotation"}]}'
    )
    assert load_trace(path).n_events >= 1


def _rows(walls: list[float], profiled: set[int] = frozenset()) -> pd.DataFrame:
    return steps_frame(
        [
            {
                "rank": 0,
                "step": i,
                "wall_ms": w,
                "loss": 1.0 / (i + 1),
                "samples": 4,
                "profiled": i in profiled,
                "t_unix_ns": i,
            }
            for i, w in enumerate(walls)
        ]
    )


def test_step_summary_is_typed_and_skips_warmup() -> None:
    s = summarise_steps(
        _rows([500.0, 300.0, 10.0, 11.0, 12.0, 13.0]), telemetry_frame([]), warmup_steps=2
    )
    assert isinstance(s, StepSummary)
    assert s.steps_done == 6 and s.step_time_ms == 11.5 and s.final_loss == pytest.approx(1 / 6)
    assert RunResult(RunStatus.OK, **s.result_fields()).step_time_ms == 11.5
    default = summarise_steps(_rows([500.0, 300.0, 10.0, 11.0, 12.0]), telemetry_frame([]))
    assert default.step_time_ms == 83.25  # the first step only: [300, 10, 11, 12], elapsed ÷ steps
    assert default.typical_step_ms == 11.5 and default.stalled_share == 0.25


def test_empty_steps_give_an_empty_summary() -> None:
    assert summarise_steps(steps_frame([]), telemetry_frame([])) == StepSummary()


def test_a_cancel_request_is_stored_for_whoever_stores_the_result(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    record = store.create("run", "r")
    assert store.read_cancel(record.run_id) is None
    store.request_cancel(record.run_id, "cancelled by you at step 4")
    assert store.read_cancel(record.run_id) == "cancelled by you at step 4"


def test_profiled_then_stopped_round_trips() -> None:
    r = RunResult(RunStatus.OK, steps_done=7, profiled_then_stopped=3)
    assert RunResult.from_dict(r.to_dict()).profiled_then_stopped == 3
    assert RunResult.from_dict({"status": "ok"}).profiled_then_stopped is None
