"""The agent's per-module record: hooks during the profiled window only, forward and backward
charged
to the module that ran them, the bytes kept for backward, where each class is defined; and a
launched run's analysis naming ``blocks.*.attn`` at its source line."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tiny_gpt.py"


def tiny_gpt() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiny_gpt_for_layers", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # inspect finds a class's source through its module
    spec.loader.exec_module(mod)
    return mod


def profiled_rows(steps: int = 2) -> dict[str, Any]:
    """Train the tiny GPT under a profiler window of ``steps`` with the layer hooks on, as the
    recorder does."""
    import torch

    from stepwise_agent.layers import LayerRecorder, layer_rows

    gpt = tiny_gpt()
    torch.manual_seed(0)
    model = gpt.TinyGPT()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rec, out = LayerRecorder(), dict[str, Any]()

    def ready(prof: Any) -> None:
        rec.stop()
        out["doc"] = layer_rows(rec, prof.events(), False, 10.0)

    schedule = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
    with torch.profiler.profile(schedule=schedule, on_trace_ready=ready) as prof:
        for i in range(steps + 1):
            if i == 1:
                rec.start()
            idx = torch.randint(0, 128, (4, 16))
            torch.nn.functional.cross_entropy(model(idx).flatten(0, 1), idx.flatten()).backward()
            opt.step()
            opt.zero_grad()
            if i >= 1:
                rec.next_step()
            prof.step()
    out["model"], out["module"] = model, gpt
    return out


def test_rows_of_a_tiny_gpt_in_process() -> None:
    from torch.nn.modules import module as nn_module

    out = profiled_rows()
    doc, gpt = out["doc"], out["module"]
    rows = {r["name"]: r for r in doc["rows"]}
    assert doc["steps"] == 2
    attn = rows["TinyGPT.blocks.0.attn"]
    assert attn["class"] == "CausalSelfAttention" and attn["calls"] == 1
    assert attn["class_line"] == inspect.getsourcelines(gpt.CausalSelfAttention)[1]
    assert attn["forward_line"] == gpt.CausalSelfAttention.forward.__code__.co_firstlineno
    assert attn["class_file"] == str(SCRIPT)
    assert attn["forward_ms"] > 0 and attn["backward_ms"] > 0 and attn["saved_bytes"] > 0
    assert attn["params"] == sum(p.numel() for p in out["model"].blocks[0].attn.parameters())
    # inclusive: a block holds its attention; the never-called ModuleList holds its blocks
    block, blocks = rows["TinyGPT.blocks.0"], rows["TinyGPT.blocks"]
    assert block["forward_ms"] >= attn["forward_ms"] and block["backward_ms"] >= attn["backward_ms"]
    assert blocks["calls"] == 0 and blocks["forward_ms"] == pytest.approx(
        rows["TinyGPT.blocks.0"]["forward_ms"] + rows["TinyGPT.blocks.1"]["forward_ms"], abs=1e-3
    )
    # every backward node found its module: the root's backward is most of the step's autograd time
    assert rows["TinyGPT"]["backward_ms"] >= blocks["backward_ms"] > 0
    # the hooks are gone once the window ends
    assert not nn_module._global_forward_pre_hooks and not nn_module._global_forward_hooks


@pytest.mark.slow
def test_a_launched_tiny_gpt_names_its_attention(tmp_path: Path) -> None:
    from advisors.analysis import analyse
    from profilers.run.launch import launch
    from profilers.run.records import RunStatus
    from profilers.store.runs import RunStore

    handle, result = launch(
        [sys.executable, str(SCRIPT), "30"], RunStore(tmp_path / "runs"), steps=2, timeout_s=600
    )
    assert result.status == RunStatus.OK, result.error
    doc = json.loads((Path(handle.run_dir) / "layers.json").read_text())
    assert doc["steps"] == 2 and doc["rows"]
    out = analyse(handle.run_dir).to_json()
    rows = {r["name"]: r for r in out["layers"]}
    assert out["layers_source"] == "agent"
    attn = rows["blocks.*.attn"]
    line = inspect.getsourcelines(tiny_gpt().CausalSelfAttention)[1]
    assert attn["instances"] == 2 and attn["class_where"] == f"tiny_gpt.py:{line}"
    assert attn["backward_ms"] > 0 and attn["saved_activation_bytes"] > 0 and 0 < attn["share"] < 1
    shares = [r["share"] for r in out["layers"]]
    assert shares == sorted(shares, reverse=True)
    assert out["top_layer"].startswith("top layer: blocks.*.")


def test_a_compiled_script_gets_no_hooks_and_is_told_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """Global hooks added mid-run would make torch.compile's code recompile inside the window."""
    import collections

    import torch._dynamo.utils as dynamo_utils
    from torch.nn.modules import module as nn_module

    from profilers.layers import from_agent
    from stepwise_agent.layers import LayerRecorder, write_layers

    counters: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    counters["stats"]["unique_graphs"] = 1
    monkeypatch.setattr(dynamo_utils, "counters", counters)
    rec = LayerRecorder()
    rec.start()
    assert not nn_module._global_forward_pre_hooks and rec.skipped is not None
    written: dict[str, Any] = {}
    write_layers(Path("."), rec, [], False, None, lambda path, doc: written.update(doc))
    assert written["rows"] == [] and "torch.compile" in (from_agent(written).note or "")
