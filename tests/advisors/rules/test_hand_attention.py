"""COMP006 from a run's per-module record: the agent names each module's forward by file and line,
the rows read that source, and the rule proposes ``sdpa_attention`` with the module and its
share."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from advisors.facts import derive
from advisors.fixes import fix_bounds
from advisors.rules.compute.hand_attention import HandAttention
from advisors.synthetic import observation
from profilers.layers import from_agent

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpt_hand_attention.py"


def _line(text: str) -> int:
    return next(i for i, s in enumerate(SCRIPT.read_text().splitlines(), 1) if s.strip() == text)


def _record(attn_ms: float) -> dict:
    """A layers.json of two GPT blocks, each with its attention module, in the held-in script."""
    attn = _line("def forward(self, x: torch.Tensor) -> torch.Tensor:")  # CausalSelfAttention's
    block = [
        i
        for i, s in enumerate(SCRIPT.read_text().splitlines(), 1)
        if s.strip() == "def forward(self, x: torch.Tensor) -> torch.Tensor:"
    ][1]
    rows = [
        {
            "name": "GPT",
            "parent": None,
            "class": "GPT",
            "forward_ms": 90.0,
            "backward_ms": 0.0,
            "calls": 1,
            "forward_file": str(SCRIPT),
            "forward_line": block,
        }
    ]
    for i in range(2):
        rows.append(
            {
                "name": f"GPT.blocks.{i}",
                "parent": "GPT",
                "class": "Block",
                "forward_ms": 40.0,
                "backward_ms": 0.0,
                "calls": 1,
                "forward_file": str(SCRIPT),
                "forward_line": block,
            }
        )
        rows.append(
            {
                "name": f"GPT.blocks.{i}.attn",
                "parent": f"GPT.blocks.{i}",
                "class": "CausalSelfAttention",
                "forward_ms": attn_ms / 2,
                "backward_ms": 0.0,
                "calls": 1,
                "forward_file": str(SCRIPT),
                "forward_line": attn,
            }
        )
    return {"rows": rows, "step_ms": 100.0}


def test_the_rows_read_the_attention_from_the_source_the_agent_named() -> None:
    rows = {r.name: r for r in from_agent(_record(50.0)).rows}
    assert rows["blocks.*.attn"].hand_attention == (
        "matmul → scale → mask → softmax → dropout → matmul"
    )
    assert rows["blocks.*"].hand_attention is None and rows["GPT"].hand_attention is None
    gone = _record(50.0)
    for r in gone["rows"]:
        r["forward_file"] = "/nonexistent/model.py"
    assert all(r.hand_attention is None for r in from_agent(gone).rows)


def test_the_rule_names_the_module_and_bounds_the_fix_by_its_share() -> None:
    obs = replace(
        observation({"forward": 0.4, "backward": 0.5}, device="cpu"),
        layers=from_agent(_record(50.0)),
    )
    f = derive(obs)
    found = HandAttention().evaluate(f)
    assert found is not None and found.fix_id == "sdpa_attention"
    assert found.evidence["attention_module"] == "blocks.*.attn"
    assert found.evidence["attention_where"].startswith("gpt_hand_attention.py:")
    assert found.evidence["attention_share_of_step"] == 0.5 and found.severity == 0.25
    assert fix_bounds(f)["sdpa_attention"].share == 0.5
    small = derive(replace(obs, layers=from_agent(_record(5.0))))
    assert HandAttention().evaluate(small) is None
    assert HandAttention().missing(derive(observation({"forward": 0.9}, device="cpu")))


def test_a_run_whose_attention_the_agent_replaced_is_not_told_again() -> None:
    from profilers.run.run_config import RunConfig

    obs = replace(
        observation({"forward": 0.4, "backward": 0.5}, device="cpu"),
        layers=from_agent(_record(50.0)),
    )
    f = replace(derive(obs), spec=RunConfig(sdpa_attention=True))
    assert HandAttention().evaluate(f) is None
    assert HandAttention().evaluate(replace(f, spec=RunConfig())) is not None
