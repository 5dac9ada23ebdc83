"""``checkpoint_modules``: the agent runs the named blocks of the script's model under
``torch.utils.checkpoint`` — the same gradients, fewer activation bytes kept for backward, a lower
peak of live tensors — and says where it acted or why it could not."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from stepwise_agent.inject.checkpoint import grouped, matches, patterns_of
from stepwise_agent.layers import LayerRecorder


class Block(nn.Module):
    def __init__(self, c: int = 64) -> None:
        super().__init__()
        self.up, self.down, self.drop = nn.Linear(c, 4 * c), nn.Linear(4 * c, c), nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.drop(self.down(torch.relu(self.up(x))))


class Net(nn.Module):
    def __init__(self, n: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))
        self.head = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def _step(net: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """One training step's parameter gradients (dropout drawn from seed 0)."""
    net.zero_grad(set_to_none=True)
    torch.manual_seed(0)
    net(x).square().mean().backward()
    return {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}


def _peak_live_bytes(net: nn.Module, x: torch.Tensor, tmp: Path) -> int:
    """The profiler's peak of live host tensors over one step (its ``[memory]`` events)."""
    net.zero_grad(set_to_none=True)
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=cpu, profile_memory=True) as prof:
        net(x).square().mean().backward()
    path = tmp / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return max(
        int(e["args"].get("Total Allocated", 0)) for e in events if e.get("name") == "[memory]"
    )


def _saved_bytes(net: nn.Module, x: torch.Tensor) -> int:
    """The bytes the agent's layer recorder counts as kept for backward over one step."""
    rec = LayerRecorder()
    rec.start()
    try:
        net.zero_grad(set_to_none=True)
        net(x).square().mean().backward()
    finally:
        rec.stop()
    return sum(rec.saved_bytes.values())


def _knob(inj: Any) -> dict[str, Any]:
    return inj.finish()["knobs"]["checkpoint_modules"]


def test_names_match_as_the_layer_rows_group_them() -> None:
    assert patterns_of(" blocks.*, head ,") == ("blocks.*", "head")
    assert grouped("h.11.mlp") == "h.*.mlp" and grouped("conv2d") == "conv2d"
    assert matches("blocks.3", "blocks.*") and matches("blocks.3", "blocks.3")
    assert not matches("blocks.3.up", "blocks.*")


def test_same_gradients_fewer_saved_bytes_lower_peak(injected: Any, tmp_path: Path) -> None:
    torch.manual_seed(1)
    plain, x = Net(), torch.randn(512, 64)
    wrapped = copy.deepcopy(plain)
    ref = _step(plain, x)
    saved_plain = _saved_bytes(plain, x)
    peak_plain = _peak_live_bytes(plain, x, tmp_path)

    inj = injected({"checkpoint_modules": "blocks.*"})
    got = _step(wrapped, x)  # the first call: the model is found and its blocks wrapped
    inj.on_step()
    assert inj.modules.models == [wrapped]  # the recomputed blocks are not taken for models
    assert got.keys() == ref.keys()
    for name, g in got.items():
        assert torch.allclose(g, ref[name], atol=1e-6, rtol=0), name
    saved = _saved_bytes(wrapped, x)
    peak = _peak_live_bytes(wrapped, x, tmp_path)
    assert saved < 0.5 * saved_plain, (saved, saved_plain)
    assert peak < peak_plain, (peak, peak_plain)

    knob = _knob(inj)
    assert knob["acted"], knob
    said = " ".join(knob["evidence"])
    assert "blocks.*: 4 Block module(s) (blocks.0, blocks.1, blocks.2, blocks.3)" in said
    assert "defined at test_checkpoint.py:" in said and "use_reentrant=False" in said
    assert inj.loop.checkpoints > 0  # the run's settings say it checkpoints
    site = inj.finish()["sites"]["checkpoint"]  # the line calling the first block
    assert site["code"] == "x = b(x)" and site["module"] == "blocks.0"


def test_eval_and_no_grad_run_the_modules_own_forward(injected: Any) -> None:
    torch.manual_seed(2)
    net, x = Net(2), torch.randn(8, 64)
    ref = copy.deepcopy(net).eval()(x)
    inj = injected({"checkpoint_modules": "blocks.*"})
    with torch.no_grad():
        net.eval()
        out = net(x)
    assert torch.equal(out, ref)
    assert inj.checkpoint.counts == {"checkpointed": 0, "plain": 2}
    knob = _knob(inj)
    assert not knob["acted"]
    assert knob["why"] == (
        "blocks.* ran only in evaluation or without grad: nothing was checkpointed"
    )


@pytest.mark.parametrize(
    "pattern, why",
    [
        ("layers.*", "no module named layers.* ran (its repeated modules: blocks.*)"),
        ("Other.blocks.*", "no module named Other.blocks.* ran (its repeated modules: blocks.*)"),
    ],
)
def test_refuses_a_name_no_module_has(injected: Any, pattern: str, why: str) -> None:
    net = Net(2)
    inj = injected({"checkpoint_modules": pattern})
    net(torch.randn(4, 64)).sum().backward()
    knob = _knob(inj)
    assert not knob["acted"] and knob["why"] == why


def test_the_model_class_may_lead_the_name(injected: Any) -> None:
    net = Net(2)
    inj = injected({"checkpoint_modules": "Net.blocks.*"})
    net(torch.randn(4, 64)).sum().backward()
    knob = _knob(inj)
    assert knob["acted"] and "Net.blocks.*: 2 Block module(s)" in knob["evidence"][0]


@pytest.mark.slow
def test_optimize_checkpoints_the_held_in_scripts_blocks(tmp_path: Path) -> None:
    """One patched run (``--check``) of an unmodified script: the baseline's per-module record
    names ``blocks.*`` as keeping most activations, the agent checkpoints those six blocks, and the
    round says each arm's peak of live tensors. Its A/B is measured by hand
    (benchmarks/results/checkpoint-layers-2026-12-02.md)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "mlp_blocks_train.py"
    before = script.read_text()
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--check",
        "--rounds",
        "1",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--fix",
        "activation_checkpointing",
        "--store",
        str(tmp_path / "runs"),
        "--",
        sys.executable,
        str(script),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert script.read_text() == before
    (r,) = json.loads(proc.stdout)["rounds"]
    assert r["fix"] == "activation_checkpointing" and r["not_applied"] is None, r["not_applied"]
    assert r["spec_patch"] == {"checkpoint_modules": "blocks.*"}
    k = r["applied"]["knobs"]["checkpoint_modules"]
    assert k["acted"] is True, k
    lines = before.splitlines()
    block = next(i for i, s in enumerate(lines, 1) if s.startswith("class Block"))
    forward = next(i for i, s in enumerate(lines, 1) if i > block and "def forward" in s)
    said = k["evidence"][0]
    assert said.startswith("blocks.*: 6 Block module(s) (blocks.0, blocks.1, ")
    assert f"defined at mlp_blocks_train.py:{block}" in said or (
        f"forward at mlp_blocks_train.py:{forward}" in said
    )
    line = next(i for i, s in enumerate(lines, 1) if s.strip() == "x = block(x)")
    assert r["where"].endswith(f"mlp_blocks_train.py:{line}")
    assert "+            x = checkpoint(block, x, use_reentrant=False)" in r["change"]["text"]
    memory = r["memory"]
    assert memory["basis"] == "host tensors"
    assert memory["after_peak_allocated_mb"] < memory["before_peak_allocated_mb"], memory
