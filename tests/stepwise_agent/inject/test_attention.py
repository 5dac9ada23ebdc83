"""``sdpa_attention``: the recogniser reads a hand-written attention from a forward's source, the
agent swaps in ``scaled_dot_product_attention`` only where outputs and input gradients agree on the
module's own input, and says why where they do not."""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from stepwise_agent.attention_source import forward_block, recognise
from stepwise_agent.inject import Injector
from stepwise_agent.inject import attention

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load_script(name: str) -> ModuleType:
    """A user's script from ``tests/scripts`` as a module (its classes, not its main)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # inspect finds the source of its classes through it
    spec.loader.exec_module(module)
    return module


gpt = _load_script("gpt_hand_attention")


class WrongScale(gpt.CausalSelfAttention):
    """minGPT's layout and pattern, but scores scaled by 1/d: SDPA's default 1/√d is not it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / k.size(-1)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class OwnLayout(nn.Module):
    """Hand-written attention over a layout the replacement does not know (``qkv`` + ``out``)."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.qkv, self.out, self.n_head = nn.Linear(c, 3 * c), nn.Linear(c, c), 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return self.out(att @ v)


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.fc(x), dim=-1)


def _injected(model: nn.Module, x: torch.Tensor) -> dict:
    """One training call of ``model`` under the agent with ``sdpa_attention`` on; its report."""
    inj = Injector({"sdpa_attention": True}, device="cpu")
    inj.install()
    try:
        model(x).sum().backward()
        inj.on_step()
        return inj.finish()
    finally:
        inj.uninstall()


def test_the_held_in_attention_is_recognised_with_its_mask_and_dropout() -> None:
    source = inspect.getsource(gpt.CausalSelfAttention.forward)
    shape, why = recognise(source)
    assert shape is not None, why
    assert shape.causal and shape.dropout
    assert "F.softmax" in source.splitlines()[shape.line - 1]
    assert shape.describe() == "matmul → scale → mask → softmax → dropout → matmul"
    lines = (SCRIPTS / "gpt_hand_attention.py").read_text().splitlines(keepends=True)
    first = gpt.CausalSelfAttention.forward.__code__.co_firstlineno
    assert forward_block(lines, first) == source


@pytest.mark.parametrize(
    "cls, why",
    [
        (gpt.Block, "its forward has no softmax"),
        (Classifier, "its forward's softmax is not between two matmuls"),
    ],
)
def test_a_forward_that_is_not_attention_is_refused_with_its_reason(cls: type, why: str) -> None:
    assert recognise(inspect.getsource(cls.forward)) == (None, why)


def test_a_forward_already_on_sdpa_is_not_hand_written() -> None:
    src = "def forward(self, q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n"
    assert recognise(src) == (None, "its forward already calls scaled_dot_product_attention")
    one_line = "def f(q, k, v):\n    return torch.softmax(q @ k.mT, -1) @ v\n"
    assert recognise(one_line)[0] is not None and not recognise(one_line)[0].causal


def test_the_held_in_model_gets_sdpa_with_the_same_outputs_and_the_same_random_stream() -> None:
    torch.manual_seed(0)
    model = gpt.GPT(65, 64, 4, 2, 32, dropout=0.0)
    idx = torch.randint(0, 65, (2, 32))
    before = model(idx).detach()
    torch.manual_seed(1)
    report = _injected(model, idx)
    after_check = torch.rand(1)  # the check drew from its own generator, not the script's
    torch.manual_seed(1)
    model(idx)  # the same call without the agent
    assert after_check == torch.rand(1)
    k = report["knobs"]["sdpa_attention"]
    assert k["acted"] is True and len(k["evidence"]) == 2, k
    assert "blocks.0.attn (" in k["evidence"][0] and "max |Δ|" in k["evidence"][0]
    assert "is_causal=True" in k["evidence"][0]
    assert all("forward" in vars(b.attn) for b in model.blocks)  # the instances' forward replaced
    site = report["sites"]["attention"]
    assert site["file"].endswith("gpt_hand_attention.py") and site["applied"] is True
    assert site["max_abs_diff"] < 1e-4
    assert torch.allclose(model(idx), before, atol=1e-5)


def test_a_replacement_that_changes_the_outputs_is_not_applied() -> None:
    torch.manual_seed(0)
    module = WrongScale(32, 4, 16, 0.0)
    report = _injected(module, torch.randn(2, 16, 32))
    k = report["knobs"]["sdpa_attention"]
    assert k["acted"] is False and "forward" not in vars(module)
    assert k["why"].startswith("the replacement changes the outputs (max |Δ| ")
    diff = float(k["why"].split("max |Δ| ")[1].split(" ")[0])
    assert diff > 1e-4
    assert report["sites"]["attention"]["max_abs_diff"] == pytest.approx(diff, rel=0.01)


def test_a_wrong_causal_flag_is_caught_by_the_check() -> None:
    torch.manual_seed(0)
    module = gpt.CausalSelfAttention(32, 4, 16, 0.0)
    layout, _ = attention.layout_of(module)
    shape, _ = recognise(inspect.getsource(type(module).forward))
    assert layout is not None and shape is not None
    wrong = attention.sdpa_forward(module, layout, type(shape)(shape.line, False, shape.dropout))
    diff, tol = attention.max_difference(module.forward, wrong, torch.randn(2, 16, 32), module)
    assert diff > tol
    right = attention.sdpa_forward(module, layout, shape)
    diff, tol = attention.max_difference(module.forward, right, torch.randn(2, 16, 32), module)
    assert diff <= tol


def test_an_unknown_layout_is_refused_and_a_model_without_attention_says_so() -> None:
    module = OwnLayout()
    report = _injected(module, torch.randn(2, 8, 32))
    k = report["knobs"]["sdpa_attention"]
    assert k["acted"] is False and "forward" not in vars(module)
    assert "its layout is not minGPT/nanoGPT's" in k["why"]
    k = _injected(Classifier(), torch.randn(3, 8))["knobs"]["sdpa_attention"]
    assert k["why"] == attention.NONE_FOUND


@pytest.mark.slow
def test_optimize_applies_sdpa_to_the_held_in_script_with_its_proof(tmp_path: Path) -> None:
    """One patched run (``--check``): the fix acts, with its equivalence check's difference, and the change is at
    the user's attention lines. Its A/B is measured by hand (1.47x kept on a quiet 2-core CPU)."""
    import json
    import subprocess

    script = SCRIPTS / "gpt_hand_attention.py"
    before = script.read_text()
    cmd = [
        sys.executable,
        "-m",
        "advisors",
        "optimize",
        "--json",
        "--store",
        str(tmp_path / "runs"),
        "--rounds",
        "1",
        "--steps",
        "6",
        "--warmup",
        "1",
        "--check",
        "--fix",
        "sdpa_attention",
        "--",
        sys.executable,
        str(script),
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert script.read_text() == before
    (r,) = json.loads(proc.stdout)["rounds"]
    assert r["fix"] == "sdpa_attention" and r["not_applied"] is None
    k = r["applied"]["knobs"]["sdpa_attention"]
    assert k["acted"] is True
    softmax = next(i for i, s in enumerate(before.splitlines(), 1) if "F.softmax(" in s)
    said = [e for e in k["evidence"] if e.startswith("blocks.0.attn (")]
    assert said and f"gpt_hand_attention.py:{softmax})" in said[0]
    diff = float(said[0].split("max |Δ| ")[1].split(" ")[0])
    assert diff < 1e-4
    assert r["where"].endswith(f"gpt_hand_attention.py:{softmax}")
    change = r["change"]  # the edit that ran, at the user's attention lines
    assert change["kind"] == "diff" and change["line"] == softmax
    assert "+        y = F.scaled_dot_product_attention(q, k, v, is_causal=True" in change["text"]
