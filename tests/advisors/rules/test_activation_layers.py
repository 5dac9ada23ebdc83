"""MEM001 and MEM002 name the layer that keeps the most activation memory for backward, from a
run's per-module record; without one their message and evidence are as before."""

from __future__ import annotations

from dataclasses import replace

from advisors.facts import derive
from advisors.rules.memory.capacity import NearCapacity
from advisors.rules.memory.out_of_memory import OutOfMemory
from advisors.synthetic import observation, run_facts
from profilers.layers import from_agent
from profilers.layers.saved import holders

MB = 1024**2


def _record() -> dict:
    """A layers.json of a model with six blocks (each an attn and an mlp) and a head."""
    rows = [{"name": "Net", "parent": None, "class": "Net", "saved_bytes": 850 * MB}]
    rows.append({"name": "Net.blocks", "parent": "Net", "class": "ModuleList"})
    rows[-1]["saved_bytes"] = 612 * MB
    for i in range(6):
        b = f"Net.blocks.{i}"
        rows += [
            {"name": b, "parent": "Net.blocks", "class": "Block", "saved_bytes": 102 * MB},
            {"name": f"{b}.attn", "parent": b, "class": "Attn", "saved_bytes": 40 * MB},
            {"name": f"{b}.mlp", "parent": b, "class": "MLP", "saved_bytes": 62 * MB},
        ]
        rows[-3].update(class_file="/src/model.py", class_line=40)
    rows.append({"name": "Net.head", "parent": "Net", "class": "Linear", "saved_bytes": 200 * MB})
    return {"rows": rows, "step_ms": 100.0}


def _facts(run, layers: bool = True):
    obs = observation(no_trace=True, run=run)
    return derive(replace(obs, layers=from_agent(_record())) if layers else obs)


def test_holders_name_the_repeated_blocks_once_and_none_inside_them() -> None:
    found = holders(from_agent(_record()), 3)
    assert [h.row.name for h in found] == ["blocks.*", "head"]
    assert found[0].row.instances == 6 and found[0].mb == 612
    assert abs((found[0].share or 0) - 612 / 850) < 1e-9
    assert found[0].describe() == "blocks.* 612 MB (72%, model.py:40)"


def test_near_capacity_names_the_layer_in_message_and_evidence() -> None:
    run = run_facts(peak_memory_mb=950.0, memory_budget_mb=1000.0)
    finding = NearCapacity().check(_facts(run))
    assert finding is not None
    assert "(blocks.* keeps 612 MB of activations for backward, 72% of the model's)" in (
        finding.message
    )
    ev = finding.evidence
    assert ev["activations_top_layer"] == "blocks.*"
    assert ev["activations_top_mb"] == 612.0 and ev["activations_top_share"] == 0.72
    assert ev["activations_top_where"] == "model.py:40"
    assert ev["activations_layers"] == "blocks.* 612 MB (72%, model.py:40); head 200 MB (24%)"


def test_out_of_memory_names_the_layer() -> None:
    run = run_facts("out_of_memory", peak_memory_mb=2100.0, memory_budget_mb=2048.0)
    finding = OutOfMemory().check(_facts(run))
    assert finding is not None and "blocks.* keeps 612 MB" in finding.message
    assert finding.evidence["activations_top_layer"] == "blocks.*"


def test_without_layer_rows_nothing_changes() -> None:
    run = run_facts(peak_memory_mb=950.0, memory_budget_mb=1000.0)
    finding = NearCapacity().check(_facts(run, layers=False))
    assert finding is not None and "activations" not in finding.message
    assert not any(k.startswith("activations") for k in finding.evidence)
    assert finding.message.startswith("Peak memory reaches 95% of capacity: shrink")
