"""The per-module view of a trace: ``nn.Module`` events nest into a tree of module classes, repeated
blocks are one row, times come from the module's own span (CPU) or the kernels it launched (GPU); a
trace without module events says so and how to record them. And a run's ``layers.json`` read back,
grouped as ``blocks.*.attn``."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.layers import NO_MODULES, from_agent, from_trace, grouped
from profilers.trace.load import load_trace
from tests.trace_factory import kernel, step, write, x


def module(name: str, ts: float, dur: float) -> dict:
    return x(f"nn.Module: {name}", ts, dur, cat="python_function")


def frame(name: str, ts: float, dur: float) -> dict:
    return x(name, ts, dur, cat="python_function")


def gpt_events(gpu: bool) -> list[dict]:
    """One 1000 µs step: a GPT_0 model whose two Block_k each hold an Attention_k (its kernel
    200 µs) and an MLP_k (its kernel 100 µs), each block's forward frame at model.py(40)."""
    ev = [step(1, 0, 1000), module("GPT_0", 10, 900), frame("model.py(60): forward", 11, 880)]
    corr = 1
    for k, t0 in enumerate((100, 500)):
        ev += [
            module(f"Block_{k}", t0, 350),
            frame("model.py(40): forward", t0 + 1, 340),
            module(f"Attention_{k}", t0 + 10, 200),
            frame("model.py(20): forward", t0 + 11, 190),
            module(f"MLP_{k}", t0 + 220, 100),
            frame("model.py(30): forward", t0 + 221, 90),
        ]
        if gpu:
            for start, dur in ((t0 + 20, 200.0), (t0 + 230, 100.0)):
                ev += [
                    x("cudaLaunchKernel", start, 5, cat="cuda_runtime", correlation=corr),
                    kernel("gemm", start + 10, dur, correlation=corr),
                ]
                corr += 1
    return ev


@pytest.mark.parametrize("gpu", [False, True])
def test_module_events_become_grouped_rows(tmp_path: Path, gpu: bool) -> None:
    trace = load_trace(write(tmp_path / "t.json", gpt_events(gpu)))
    layers = from_trace(trace, 1.0)
    rows = {r.name: r for r in layers.rows}
    assert layers.source == "trace" and "forward only" in (layers.note or "")
    attn = rows["GPT.Block.Attention"]
    assert attn.instances == 2 and attn.calls == 2 and attn.parent == "GPT.Block"
    assert attn.forward_where == "model.py:20" and rows["GPT.Block"].forward_where == "model.py:40"
    # CPU: the spans (2 × 200 µs); GPU: the kernels each launched (2 × 200 µs of gemm)
    assert attn.forward_ms == pytest.approx(0.4) and attn.share == pytest.approx(0.4)
    assert rows["GPT.Block.MLP"].forward_ms == pytest.approx(0.2)
    assert rows["GPT"].forward_ms == pytest.approx(0.6 if gpu else 0.9)
    assert attn.backward_ms is None and attn.saved_bytes is None
    assert layers.rows[0].name == "GPT"  # largest share first
    assert layers.top is not None and layers.top.name == "GPT.Block.Attention"
    assert layers.evidence() == "top layer: GPT.Block.Attention 40% of the step (model.py:20)"


def test_a_trace_without_module_events_says_how_to_record_them(tmp_path: Path) -> None:
    trace = load_trace(
        write(
            tmp_path / "t.json",
            [step(1, 0, 100), x("aten::mm", 10, 50), frame("train.py(3): main", 5, 90)],
        )
    )
    layers = from_trace(trace, 0.1)
    assert layers.rows == () and layers.note == NO_MODULES and layers.evidence() is None
    assert "with_stack=True" in NO_MODULES and "with_modules=True" in NO_MODULES


def test_a_real_with_stack_trace(shared_traces: Path) -> None:
    """TraceLens' BERT-small on an H100: four BertLayer blocks, their attention's forward at its
    source line."""
    trace = load_trace(shared_traces / "host/tracelens_h100_bert-small.json.gz")
    layers = from_trace(trace, 4.426114)
    rows = {r.name.split("BertModel.")[-1]: r for r in layers.rows}
    layer = rows["BertEncoder.BertLayer"]
    assert layer.instances == 4 and layer.calls == 4
    assert rows["BertEncoder.BertLayer.BertAttention"].forward_where == "modeling_bert.py:505"
    # the GPU time of its kernels: a host-bound step (GPU busy 7%), so a small share
    assert layer.share is not None and 0 < layer.share < 0.1
    assert layer.forward_ms < rows["BertEncoder"].forward_ms + 1e-9
    top = "top layer: BertLMHeadModel.BertModel.BertEncoder.BertLayer."
    assert (layers.evidence() or "").startswith(top)


def test_grouping_names() -> None:
    assert grouped("blocks.3.attn") == "blocks.*.attn" and grouped("h.10") == "h.*"
    assert grouped("layer2.conv1") == "layer2.conv1" and grouped("mlp.0") == "mlp.*"


def agent_row(
    name: str, parent: str | None, cls: str, fwd: float, bwd: float, saved: int, params: int
) -> dict:
    return {
        "name": name,
        "parent": parent,
        "class": cls,
        "class_file": "/x/model.py",
        "class_line": 10,
        "forward_file": "/x/model.py",
        "forward_line": 17,
        "params": params,
        "calls": 1.0,
        "forward_ms": fwd,
        "backward_ms": bwd,
        "saved_bytes": saved,
    }


def test_a_runs_record_is_grouped_by_block() -> None:
    doc = {
        "steps": 3,
        "device": "cpu",
        "step_ms": 10.0,
        "timing": "CPU time inside each module",
        "rows": [
            agent_row("GPT", None, "GPT", 6.0, 3.0, 300, 30),
            agent_row("GPT.blocks", "GPT", "ModuleList", 6.0, 3.0, 300, 30),
            agent_row("GPT.blocks.0", "GPT.blocks", "Block", 3.0, 1.5, 150, 15),
            agent_row("GPT.blocks.1", "GPT.blocks", "Block", 3.0, 1.5, 150, 15),
            agent_row("GPT.blocks.0.attn", "GPT.blocks.0", "Attn", 2.0, 1.0, 100, 10),
            agent_row("GPT.blocks.1.attn", "GPT.blocks.1", "Attn", 1.0, 0.5, 50, 10),
        ],
    }
    layers = from_agent(doc)
    rows = {r.name: r for r in layers.rows}
    assert set(rows) == {"GPT", "blocks", "blocks.*", "blocks.*.attn"}
    attn = rows["blocks.*.attn"]
    got = (attn.instances, attn.forward_ms, attn.backward_ms, attn.saved_bytes, attn.params)
    assert got == (2, 3.0, 1.5, 150, 20)
    assert attn.share == pytest.approx(0.45) and attn.parent == "blocks.*"
    assert attn.class_where == "model.py:10"
    assert rows["blocks"].parent == "GPT" and rows["GPT"].parent is None
    assert layers.evidence() == "top layer: blocks.*.attn 45% of the step (model.py:10)"
    assert from_agent({"error": "RuntimeError: x"}).rows == ()
    assert "RuntimeError: x" in (from_agent({"error": "RuntimeError: x"}).note or "")
