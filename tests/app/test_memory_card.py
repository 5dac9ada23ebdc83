"""A memory fix's Apply card shows what it did to memory beside the step time it cost: the
terminal's sentence (the peak of live tensors before → after with its change, the run peaks, the
step times), read from the one stored record, and a bar of each peak before beside after."""

from __future__ import annotations

import json

from tests.app.conftest import assert_clean, open_page, plain
from tests.app.fake_runs import MEMORY_SAID, fake_run, memory_apply


def _card(store, peaks: bool = True):
    """The Advisor page of a run with a stored memory-fix Apply (its record, the page)."""
    source = fake_run(store, label="source run")
    x = memory_apply(store, source, peaks)
    at = open_page()
    at.query_params["run"] = source.run_id
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    return x, at


def test_the_apply_card_says_the_memory_it_saved(store) -> None:
    x, at = _card(store)
    assert x.memory_text == MEMORY_SAID  # the sentence ``optimize`` prints for this record
    said = [plain(m.value) for m in at.markdown if "Memory:" in m.value]
    assert said == [f"**Memory:** {MEMORY_SAID}"]
    # beside the speed-up it cost, on the same card
    assert next(m.value for m in at.metric if m.label == "Speed-up") == "0.80×"
    [fig] = [
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Memory before and after" in c.proto.spec
    ]
    bars = {t["name"]: t["y"] for t in fig["data"]}
    assert bars == {"before": [612.4, 900.0], "after": [210.2, 700.0]}
    assert fig["data"][0]["x"] == ["peak of live host tensors", "run peak"]


def test_no_memory_no_memory_row(store) -> None:
    """An Apply whose record has no memory (a speed fix, an older record) shows neither the
    sentence nor the bar."""
    _, at = _card(store, peaks=False)
    assert any(m.label == "Speed-up" for m in at.metric)  # the card is there
    assert not [m for m in at.markdown if "Memory:" in m.value]
    assert not [c for c in at.get("plotly_chart") if "Memory before and after" in c.proto.spec]


def test_a_ladder_round_says_its_memory(store) -> None:
    from dataclasses import replace

    from advisors.experiments.results.record import LadderRecord
    from advisors.experiments.results.stored_view import ladder_view
    from profilers.store import experiments

    source = fake_run(store, label="source run")
    rung = replace(memory_apply(store, source), kind="ladder round", round=1)
    lad = LadderRecord(
        rounds=(rung,), total_speedup=0.8, rounds_asked=1, why_stopped="", complete=True
    )
    exp = experiments.start(store, source.run_id, "ladder", "Ladder", {})
    experiments.finish(store, exp.run_id, ladder_view(lad))
    at = open_page()
    at.query_params["run"] = source.run_id
    at.switch_page("views/advisor.py").run()
    assert_clean(at)
    said = f"Round 1 (Activation checkpointing) memory: {MEMORY_SAID}."
    assert said in [plain(c.value) for c in at.caption]
