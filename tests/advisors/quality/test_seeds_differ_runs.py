"""A script that pins ``torch.manual_seed(0)`` gives three different curves under to-quality's three seeds (slow:
real runs through the launcher and the agent), and each run records the calls the agent offset."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advisors.experiments.to_quality import arm_spec, store_curve_runner
from advisors.quality import fair
from advisors.quality.target import Budget
from profilers.run.script_spec import ScriptSpec
from profilers.store.runs import RunStore

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pinned_seed_train.py"
pytestmark = pytest.mark.slow


def test_a_script_that_pins_its_seed_gives_three_different_curves(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    spec = ScriptSpec(command=(sys.executable, str(SCRIPT)))
    budget = Budget(steps=20)
    run = store_curve_runner(store, budget)
    runs = [run(arm_spec(spec, budget, s), None) for s in range(3)]
    assert all(r.status == "ok" for r in runs), [r.error for r in runs]
    curves = [r.curve.values for r in runs]
    assert len(set(curves)) == 3 and not fair.one_run([r.curve for r in runs])
    line = next(
        i for i, t in enumerate(SCRIPT.read_text().splitlines(), 1) if t == "torch.manual_seed(0)"
    )
    for s, r in enumerate(runs):
        assert r.seeding is not None and r.seeding["offset"] == s
        calls = {c["call"]: c for c in r.seeding["changed"]}
        assert set(calls) == {"torch.manual_seed", "random.seed", "numpy.random.seed"}
        assert calls["torch.manual_seed"] == {
            "call": "torch.manual_seed",
            "asked": 0,
            "used": s,
            "site": f"pinned_seed_train.py:{line}",
        }
