"""Only claims about what was observed (issue 29, item 7): a trial of a longer run (a launched script profiled
then stopped, a step-limited trial, a run that was killed) never yields "early stopping would have saved X% of
the run"; a run observed to its end still can; a loss still falling is not a plateau."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisors.diagnosis import diagnose
from advisors.observation import observe_run, run_facts
from profilers.run.records import RunResult, RunStatus

FLAT = [2.0 - 0.1 * i for i in range(10)] + [
    1.0 + 0.001 * (i % 2) for i in range(17)
]  # 27 steps, flat after 10


def _run_folder(tmp_path: Path, losses: list[float], **result: object) -> Path:
    rows = [
        {
            "rank": 0,
            "step": i,
            "wall_ms": 40.0,
            "loss": v,
            "samples": 8,
            "profiled": False,
            "t_unix_ns": i * 40_000_000,
        }
        for i, v in enumerate(losses)
    ]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fields = {"status": RunStatus.OK, "steps_done": len(losses), "step_time_ms": 40.0, **result}
    (tmp_path / "result.json").write_text(json.dumps(RunResult(**fields).to_dict()))  # type: ignore[arg-type]
    return tmp_path


def _plateau(run_dir: Path) -> str | None:
    return next(
        (f.message for f in diagnose(observe_run(run_dir)).findings if f.rule == "TRAIN001"), None
    )


@pytest.mark.parametrize(
    "result",
    [{"profiled_then_stopped": 25}, {"profiled_then_stopped": 0}, {"status": RunStatus.KILLED}],
    ids=["profiled-then-stopped", "measured-then-stopped", "killed"],
)
def test_a_trial_never_claims_an_early_stopping_saving_for_the_whole_run(
    tmp_path: Path, result: dict[str, object]
) -> None:
    run_dir = _run_folder(tmp_path, FLAT, **result)
    assert run_facts(run_dir).stopped_after == 27
    message = _plateau(run_dir)
    assert message is not None and message.startswith("In the 27 steps observed")
    assert "would have saved" not in message and "%" not in message
    finding = next(f for f in diagnose(observe_run(run_dir)).findings if f.rule == "TRAIN001")
    assert finding.fix_id is None and finding.evidence["saved_share"] is None


def test_a_run_observed_to_its_end_still_can(tmp_path: Path) -> None:
    run_dir = _run_folder(tmp_path, FLAT)
    assert run_facts(run_dir).stopped_after is None
    message = _plateau(run_dir)
    assert (
        message is not None
        and "early stopping would have saved" in message
        and "of the run's compute" in message
    )


def test_a_loss_still_falling_is_not_a_plateau(tmp_path: Path) -> None:
    # the run_clm.py trial: still falling 7.39 → 7.21 over its last steps, under step-to-step noise
    losses = [8.2 - 0.08 * i for i in range(10)] + [
        7.39 - 0.0113 * i + (0.05 if i % 2 else -0.05) for i in range(17)
    ]
    assert _plateau(_run_folder(tmp_path, losses)) is None
