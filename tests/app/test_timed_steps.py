"""The Advisor's "Timed steps per run" on a sample workload: its trials run long enough for the timed steps and
the profiler's window (a workload stops at its own --steps; issue 42's trials and commands of other lengths)."""

from __future__ import annotations

from pathlib import Path

from advisors.fixes.context import ScriptContext
from app.services.script_apply import ScriptTarget

WORKLOAD = (
    "python",
    "-m",
    "sample_runs.train",
    "data_bound",
    "--steps",
    "12",
    "--num-workers",
    "2",
)


def _target(command: tuple[str, ...]) -> ScriptTarget:
    from profilers.run.script_spec import ScriptSpec

    spec = ScriptSpec(command=command, warmup_steps=3, measure_steps=5, profile_steps=3)
    return ScriptTarget(spec, Path("."), "cpu", ScriptContext(device="cpu"))


def test_more_timed_steps_make_a_workload_run_longer() -> None:
    longer = _target(WORKLOAD).with_steps(8).spec
    assert longer.measure_steps == 8 and longer.total_steps == 15
    assert longer.command == (
        *WORKLOAD[:5],
        "15",
        *WORKLOAD[6:],
    )  # the flag in place, the others kept
    assert (
        _target(WORKLOAD).with_steps(4).spec.command == WORKLOAD
    )  # it already outlasts the window
    users = ("python", "train.py", "--steps", "12")  # a user's script: its flags are its own
    assert _target(users).with_steps(8).spec.command == users
    epochs = ("python", "-m", "sample_runs.train", "data_bound", "--epochs", "1")
    assert _target(epochs).with_steps(8).spec.command == epochs
