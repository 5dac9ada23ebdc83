"""The Analysis page's Layers tab and the Advisor's top layer: a with_stack trace's module tree, a
trace without module events (the sentence that says how to record them), a run's own record sized by
memory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.app.conftest import assert_clean, open_page, plain
from tests.app.fake_runs import fake_run
from tests.profilers.trace.test_layers import agent_row

TAB = "stepwise.analysis_tab"


def layers_tab(at):
    at.session_state[TAB] = "Layers"
    at.run()
    assert_clean(at)
    return at


def icicles(at) -> list[dict]:
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [f for f in figs if f["data"] and f["data"][0]["type"] == "icicle"]


def test_a_with_stack_upload_draws_its_module_tree(store, shared_traces: Path) -> None:
    store.import_trace(shared_traces / "host/tracelens_h100_bert-small.json.gz")
    at = layers_tab(open_page("analysis"))
    [fig] = icicles(at)
    assert "BertLMHeadModel.BertModel.BertEncoder.BertLayer" in fig["data"][0]["ids"]
    [table] = at.dataframe
    assert table.value["module"].iloc[0] == "BertLMHeadModel"  # largest share first
    assert (table.value["instances"] == 4).any()
    assert any("Top layer: BertLMHeadModel" in plain(m.value) for m in at.markdown)
    assert any("forward only" in c.value for c in at.caption)


def test_an_upload_without_module_events_says_how_to_record_them(
    store, shared_traces: Path
) -> None:
    store.import_trace(shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz")
    at = layers_tab(open_page("analysis"))
    assert not icicles(at) and not at.dataframe
    said = [plain(i.value) for i in at.info]
    assert any("no module information" in s and "with_stack=True" in s for s in said)


def test_a_runs_record_by_time_and_memory_and_the_advisor_names_the_top_layer(store) -> None:
    doc = {
        "steps": 2,
        "device": "cpu",
        "step_ms": 20.0,
        "timing": "CPU time inside each module",
        "rows": [
            agent_row("GPT", None, "GPT", 8.0, 8.0, 4 * 2**20, 30),
            agent_row("GPT.blocks", "GPT", "ModuleList", 8.0, 8.0, 4 * 2**20, 30),
            agent_row("GPT.blocks.0", "GPT.blocks", "Block", 4.0, 4.0, 2 * 2**20, 15),
            agent_row("GPT.blocks.1", "GPT.blocks", "Block", 4.0, 4.0, 2 * 2**20, 15),
            agent_row("GPT.blocks.0.attn", "GPT.blocks.0", "Attn", 2.0, 2.0, 2**20, 10),
            agent_row("GPT.blocks.1.attn", "GPT.blocks.1", "Attn", 2.0, 2.0, 2**20, 10),
            agent_row("GPT.blocks.0.mlp", "GPT.blocks.0", "MLP", 1.0, 1.0, 2**19, 5),
            agent_row("GPT.blocks.1.mlp", "GPT.blocks.1", "MLP", 1.0, 1.0, 2**19, 5),
        ],
    }
    fake_run(store, files={"layers.json": doc})
    at = layers_tab(open_page("analysis"))
    [fig] = icicles(at)
    assert set(fig["data"][0]["ids"]) == {
        "GPT",
        "blocks",
        "blocks.*",
        "blocks.*.attn",
        "blocks.*.mlp",
    }
    said = "top layer: blocks.*.attn 40% of the step (model.py:10)"
    assert any("T" + said[1:] in plain(m.value) for m in at.markdown)
    at.radio(key="analysis.layers_by").set_value("memory").run()
    assert_clean(at)
    [fig] = icicles(at)
    assert "activation memory" in fig["layout"]["title"]["text"]
    advisor = open_page("advisor")
    assert_clean(advisor)
    assert any(plain(c.value) == said for c in advisor.caption)
