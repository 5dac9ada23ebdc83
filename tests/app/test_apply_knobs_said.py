"""Apply says what it injects before it runs, and why a worker count differs from the verdict's (issue 33: the
headline advised num_workers=2, Apply injected and diffed 4, unexplained)."""

from __future__ import annotations

from pathlib import Path

from advisors.fixes.context import ScriptContext
from advisors.fixes import FIXES
from app.services.script_apply import ScriptTarget, injected_knobs
from profilers.run.script_spec import ScriptSpec


def _target(busy: float) -> ScriptTarget:
    ctx = ScriptContext(device="cpu", cores=2, host_busy=busy, loader={"num_workers": 0})
    return ScriptTarget(ScriptSpec(command=("python", "train.py")), Path("."), "cpu", ctx)


def test_idle_cores_get_twice_the_workers_and_the_reason() -> None:
    knobs, why = injected_knobs(_target(0.4), FIXES["dataloader_workers"])
    assert knobs["num_workers"] == 4
    assert why is not None and "2 cores" in why and "40% busy" in why and "one per core" in why


def test_busy_cores_get_one_worker_per_core_and_no_excuse() -> None:
    knobs, why = injected_knobs(_target(0.8), FIXES["dataloader_workers"])
    assert knobs["num_workers"] == 2 and why is None
