"""How the live view words a run's end (issue 12.7), from :func:`app.services.launching.outcome_text`."""

from __future__ import annotations

from app.services.launching import cancel_reason, outcome_text
from profilers.run.records import RunResult, RunStatus


def test_a_cancel_is_the_users_not_a_crash() -> None:
    reason = cancel_reason({"step": 12, "total_steps": 40, "eta_s": 30})
    assert reason == "cancelled by you at step 12"
    result = RunResult(RunStatus.KILLED, error=reason, steps_done=12)
    text = outcome_text(RunStatus.KILLED, result, reason, "the worker was killed by SIGTERM")
    assert text == "Cancelled by you at step 12." and "SIGTERM" not in text
    assert (
        outcome_text(RunStatus.RUNNING, None, reason, None)
        == "stopping: cancelled by you at step 12"
    )
    assert cancel_reason(None) == "cancelled by you before its first step"


def test_a_script_stopped_after_its_profiled_steps_says_so() -> None:
    result = RunResult(RunStatus.OK, steps_done=7, profiled_then_stopped=3)
    assert (
        outcome_text(RunStatus.OK, result, None, None)
        == "Profiled 3 steps of your script, then stopped it after step 7: a profile needs only those steps, so the "
        "script is not run to its end."
    )
    assert (
        outcome_text(RunStatus.OK, RunResult(RunStatus.OK, steps_done=7), None, None)
        == "Finished: ok after 7 steps."
    )


def test_a_failure_keeps_its_error() -> None:
    assert (
        outcome_text(RunStatus.FAILED, RunResult(RunStatus.FAILED, steps_done=2), None, "boom")
        == "Ended failed after 2 steps: boom"
    )


def test_a_cut_profile_names_the_profiler_not_the_script() -> None:
    cut = "the profiler's events outgrew the profile's memory budget during step 2: …"
    result = RunResult(RunStatus.OK, steps_done=3, profiled_then_stopped=1, profile_cut=cut)
    text = outcome_text(RunStatus.OK, result, None, None)
    assert (
        text.startswith(
            "Profiled part of a step, then stopped your script after step 3: The profiler's events "
            "outgrew"
        )
        and "batch" not in text
    )
