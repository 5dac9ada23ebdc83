"""``activation_checkpointing`` on a user's script: the script's own switch when it has one, else
``checkpoint_modules`` for the repeated block the last run's per-module record shows keeping the
most activation memory; with no such record it stays advice."""

from __future__ import annotations

import pytest

import json
from dataclasses import replace
from pathlib import Path

from advisors.experiments.script_fixes import script_patched
from tests.advisors.experiments.test_script_knobs import recorded
from tests.advisors.experiments.test_script_knobs_loop import SPLIT
from advisors.experiments.script_strategy import context_of
from advisors.fixes import FIXES, spec_of
from advisors.fixes.context import ScriptContext
from profilers.run.script_spec import ScriptSpec

MB = 1024**2
FIX = FIXES["activation_checkpointing"]


def _run_dir(tmp_path: Path) -> Path:
    """A run folder whose layers.json has four blocks keeping 400 of the model's 500 MB."""
    rows = [{"name": "Net", "parent": None, "class": "Net", "saved_bytes": 500 * MB}]
    rows += [
        {"name": f"Net.layers.{i}", "parent": "Net", "class": "Block", "saved_bytes": 100 * MB}
        for i in range(4)
    ]
    rows.append({"name": "Net.head", "parent": "Net", "class": "Linear", "saved_bytes": 100 * MB})
    run = tmp_path / "run"
    run.mkdir()
    (run / "layers.json").write_text(json.dumps({"rows": rows, "step_ms": 10.0}))
    return run


def test_a_run_with_layers_injects_its_heaviest_block(tmp_path: Path) -> None:
    ctx = context_of(_run_dir(tmp_path), ScriptContext(device="cpu"))
    assert [r.name for r in ctx.layers if r.instances > 1] == ["layers.*"]
    spec = ScriptSpec(command=("python", "train.py"), cwd=str(tmp_path))
    out = script_patched(spec, FIX, ctx)
    assert out is not None and out.inject == {"checkpoint_modules": "layers.*"}
    assert spec_of(FIX.id).not_injectable_here(ctx) is None
    # a later run that wrote no record keeps what the last one showed
    again = context_of(tmp_path, ctx)
    assert again.layers == ctx.layers


def test_without_a_record_it_is_advice_and_nothing_is_injected(tmp_path: Path) -> None:
    spec = ScriptSpec(command=("python", "train.py"), cwd=str(tmp_path))
    ctx = ScriptContext(device="cpu")
    assert script_patched(spec, FIX, ctx) is None
    why = spec_of(FIX.id).not_injectable_here(ctx)
    assert why is not None and "no per-module record" in why


@pytest.mark.slow
def test_the_scripts_own_switch_comes_first(tmp_path: Path) -> None:
    """A script with its own ``--activation-checkpointing`` (a sample workload's) is changed
    through it, with or without a per-module record."""
    config = recorded(tmp_path, SPLIT, [])
    spec = ScriptSpec(command=("python", str(tmp_path / "train.py")), cwd=str(tmp_path))
    with_layers = context_of(_run_dir(tmp_path), ScriptContext())
    for ctx in (ScriptContext(device="cpu"), with_layers):
        out = script_patched(spec, FIX, replace(ctx, config=config))
        assert out is not None and out.inject == {}, ctx
        assert out.command[-1] == "--activation-checkpointing"
        assert out.observe == {"activation_checkpointing": True}
