"""``analyze --json``'s per-module fields: ``layers`` (rows, largest share first),
``layers_source``, ``layers_note`` and ``top_layer``, for a trace with module events and one
without."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_analyze_contract import analyze

ROW_KEYS = {
    "name",
    "parent",
    "class",
    "instances",
    "calls_per_step",
    "forward_ms",
    "backward_ms",
    "share",
    "saved_activation_bytes",
    "params",
    "class_where",
    "forward_where",
    "hand_attention",
}


def test_a_with_stack_trace_has_layers(shared_traces: Path) -> None:
    done = analyze(str(shared_traces / "memory/tracelens_h100_qwen1.5-0.5b.json.gz"), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "breakdown" in out and "findings" in out  # every existing field is still there
    rows = out["layers"]
    assert rows and all(set(r) == ROW_KEYS for r in rows)
    assert [r["share"] for r in rows] == sorted((r["share"] for r in rows), reverse=True)
    assert out["layers_source"] == "trace" and "forward only" in out["layers_note"]
    decoder = [r for r in rows if r["name"].endswith("Qwen2DecoderLayer")]
    assert decoder and decoder[0]["instances"] == 24 and decoder[0]["backward_ms"] is None
    assert out["top_layer"].startswith("top layer: ")


def test_a_trace_without_module_events_says_how_to_record_them(shared_traces: Path) -> None:
    done = analyze(str(shared_traces / "edge/hta_cpu_only_gloo_rank-34.pt.trace.json.gz"), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["layers"] == [] and out["layers_source"] == "none" and out["top_layer"] is None
    assert "no module information" in out["layers_note"] and "with_stack=True" in out["layers_note"]
