"""Apply says what it injects before it runs, and where its worker count comes from: the run's one count, the
number the verdict quotes (the headline once advised num_workers=2 while Apply injected 4, unexplained)."""

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
    assert why is not None
    assert "trying 4: 2 per core, the loader waited while the 2 cores sat idle, 40% busy" in why


def test_busy_cores_get_one_worker_per_core_and_say_so() -> None:
    knobs, why = injected_knobs(_target(0.8), FIXES["dataloader_workers"])
    assert knobs["num_workers"] == 2 and why == "2 cores"


def test_a_fix_without_workers_gives_no_reason() -> None:
    knobs, why = injected_knobs(_target(0.8), FIXES["cudnn_benchmark"])
    assert "num_workers" not in knobs and why is None
