"""The ``sdpa_attention`` fix as a diff of the user's attention lines: the edited file computes the
same as the original, and code of another shape gets the snippet at the line instead."""

from __future__ import annotations

import types
from pathlib import Path

import torch

from advisors.experiments.attention_diff import sdpa_edit
from advisors.experiments.script_diff import render
from advisors.fixes import get_fix

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpt_hand_attention.py"


def _softmax_line(source: str) -> int:
    return next(i for i, s in enumerate(source.splitlines(), 1) if "F.softmax(" in s)


def _site(source: str, **extra: object) -> dict:
    return {
        "file": str(SCRIPT),
        "line": _softmax_line(source),
        "causal": True,
        "dropout": "attn_dropout",
        **extra,
    }


def _module(source: str) -> types.ModuleType:
    mod = types.ModuleType("edited")
    exec(compile(source, "edited.py", "exec"), mod.__dict__)
    return mod


def test_the_diff_replaces_the_attention_lines_and_computes_the_same() -> None:
    source = SCRIPT.read_text()
    site = _site(source)
    change = render(
        get_fix("sdpa_attention"),
        {"sdpa_attention": True},
        "attention",
        {**site, "target": "attention", "all": [site]},
    )
    assert change.kind == "diff" and change.line == site["line"]
    removed = [
        s[1:].strip()
        for s in change.text.splitlines()
        if s.startswith("-") and not s.startswith("---")
    ]
    assert removed[0].startswith("att = (q @ k.transpose(-2, -1))") and removed[-1] == "y = att @ v"
    assert (
        "+        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, "
        "dropout_p=self.attn_dropout.p if self.training else 0.0)"
    ) in change.text
    edited = sdpa_edit(source, site)
    assert edited is not None
    old, new = _module(source), _module(edited)
    torch.manual_seed(0)
    a = old.CausalSelfAttention(64, 4, 32, 0.0)
    b = new.CausalSelfAttention(64, 4, 32, 0.0)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 32, 64)
    assert torch.allclose(a(x), b(x), atol=1e-5)


def test_attention_weights_used_later_keep_the_snippet(tmp_path: Path) -> None:
    source = SCRIPT.read_text().replace(
        "        return self.resid_dropout(self.c_proj(y))",
        "        self.last_att = att\n        return self.resid_dropout(self.c_proj(y))",
    )
    assert sdpa_edit(source, _site(source)) is None
    path = tmp_path / "train.py"
    path.write_text(source)
    site = {**_site(source), "file": str(path)}
    change = render(
        get_fix("sdpa_attention"),
        {"sdpa_attention": True},
        "attention",
        {**site, "target": "attention", "all": [site]},
    )
    assert change.kind == "snippet" and "scaled_dot_product_attention" in change.text
