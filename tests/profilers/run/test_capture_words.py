"""A capture says what made it: its stored run's label names the trigger's rise, and its headline
sentence the rule and the step it fired at (:mod:`profilers.run.captures`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from profilers.run.captures import (
    CaptureTrigger,
    capture_trigger,
    store_captures,
    trigger_sentence,
    trigger_words,
)
from profilers.store.runs import RunStore

REASON = "step time +91% for 13 steps (2.0 s) (80.1 → 153.2 ms, beyond its noise of ±9.0 ms)"
NUMBERS = {"judged_steps": 13.0, "base_ms": 80.1, "now_ms": 153.2, "rise_pct": 91.3}
STEP_TIME = {"kind": "step_time", "step": 252, "reason": REASON, "numbers": NUMBERS}


def test_each_rule_says_its_rise_in_a_few_words() -> None:
    assert trigger_words("step_time", REASON, NUMBERS) == "step time +91%"
    share = {"base_share": 0.05, "now_share": 0.5}
    assert trigger_words("data_share", "…", share) == "batch drawing 5% → 50%"
    assert trigger_words("memory", "…", {"grown_mb": 312.4}) == "memory +312 MiB"
    # a capture written before the rules kept their numbers: the reason's first clause
    old = "step time +24% for 20 steps (2.0 s) (80.0 → 99.2 ms, beyond its noise of ±18.7 ms)"
    assert trigger_words("step_time", old, {"judged_steps": 20.0}) == "step time +24%"
    assert trigger_words("on_demand", "asked for (stepwise capture)", {}) == "asked for"


def test_the_headline_sentence_names_the_rule_and_the_step() -> None:
    trigger = CaptureTrigger("step_time", 252, REASON)
    said = trigger_sentence(trigger)
    assert said.startswith("Captured by the watch's step-time rule at step 252: step time +91%")
    assert "request" in trigger_sentence(CaptureTrigger("on_demand", 9, "asked for"))


def test_a_stored_capture_is_labelled_with_its_rise(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    parent = store.create("launch", "train.py", files={"boot.json": {"watch": {}}})
    run_dir = Path(parent.run_dir)
    (run_dir / "steps.jsonl").write_text(
        "".join(
            json.dumps({"rank": 0, "step": s, "wall_ms": 150.0, "profiled": s >= 254}) + "\n"
            for s in range(258)
        )
    )
    folder = run_dir / "captures" / "r0c001"
    folder.mkdir(parents=True)
    with gzip.open(folder / "rank0.1.pt.trace.json.gz", "wt") as fh:
        fh.write(json.dumps({"traceEvents": []}))
    capture = {"n": 1, "rank": 0, "trigger": STEP_TIME, "steps": [254, 256], "status": "done"}
    (folder / "capture.json").write_text(json.dumps(capture))
    (child,) = store_captures(store, parent.run_id, final=True)
    assert store.get(child).label == "train.py · capture 1: steps 254–256, step time +91%"
    trigger = capture_trigger(store.path(child))
    assert trigger is not None and trigger.numbers["rise_pct"] == 91.3
