"""The end of ``traceEvents`` is found whatever valid JSON follows it.

Kineto can write its log arrays (``INFO``, ``ERROR``...) after the events array, the way HTA's
MTIA test trace has them: many ``]`` of nested arrays and log lines that hold brackets, quotes and
backslashes. Each reader (whole, sequential pieces, worker processes; plain and gzip) must read the
same events as without that tail."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

import profilers.trace.json_events as trace_json
import profilers.trace.parallel as parallel
from profilers.trace.breakdown import breakdown
from profilers.trace.load import load_trace
from tests.test_analyze_contract import analyze
from tests.trace_factory import kernel, step, x

pytestmark = pytest.mark.real_parse  # every load parses (the session's shared-trace memo stays out)


def events(steps: int, ops: int) -> list[dict]:
    """``steps`` profiler steps of ``ops`` CPU ops, each launching a kernel."""
    out: list[dict] = []
    for s in range(steps):
        t0 = s * ops * 20.0
        out.append(step(s + 1, t0, ops * 20.0))
        for i in range(ops):
            out.append(x("aten::mm", t0 + i * 20, 8, correlation=s * ops + i))
            out.append(kernel(f"gemm_{i % 7}", t0 + i * 20 + 9, 10, correlation=s * ops + i))
    return out


def log_tail(lines: int) -> dict:
    """Log arrays as Kineto's logger writes them after the events: strings full of JSON's own
    punctuation, nested arrays several deep, and empty ones."""
    info = [
        [f'[I {i}] rank 0 "done" \\ ]]] {{', [f"nested] {i}", [f"[deeper\\\\] {i}"], []]]
        for i in range(lines)
    ]
    return {"traceName": "rank_0]", "INFO": info, "WARNING": [], "ERROR": [['e]"]'], [[["]"]]]]}


def kineto_text(evs: list[dict], tail: dict | None) -> bytes:
    """The document in Kineto's layout: one event per line, top-level fields before and after the
    array."""
    head = b'{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "traceEvents": [\n  '
    body = b",\n  ".join(orjson.dumps(e) for e in evs)
    after = b"".join(
        b",\n  " + orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in (tail or {}).items()
    )
    return head + body + b"\n]" + after + b"\n}\n"


def write_trace(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data, 1) if path.name.endswith(".gz") else data)
    return path


def assert_same_reading(with_tail: Path, without: Path) -> None:
    a, b = load_trace(with_tail), load_trace(without)
    assert a.n_events == b.n_events
    ba, bb = breakdown(a), breakdown(b)
    assert ba.per_step.equals(bb.per_step)
    assert ba.kernels.equals(bb.kernels)


@pytest.mark.parametrize("lines", [3, 400, 12_000])  # the longest tail is larger than a piece
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_events_end_before_a_long_tail_of_nested_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: int, workers: int, suffix: str
):
    evs = events(steps=6, ops=700)
    tail = log_tail(lines)
    data = kineto_text(evs, tail)
    json.loads(data)  # the fixture is valid JSON, as the real trace is
    assert orjson.dumps(tail).count(b"]") > 16  # more closes than the old candidate search tried
    monkeypatch.setattr(trace_json, "WHOLE_LIMIT", 256 * 1024)  # streamed in many pieces
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 256 * 1024)
    monkeypatch.setenv(parallel.WORKERS_ENV, str(workers))
    assert len(data) > 3 * trace_json.WHOLE_LIMIT
    plain = write_trace(tmp_path / f"plain{suffix}", kineto_text(evs, None))
    assert_same_reading(write_trace(tmp_path / f"tail{suffix}", data), plain)


def test_finish_returns_the_fields_after_the_events():
    tail = log_tail(50)
    body = kineto_text([x("a]", 1, 2), x('b"]', 3, 4)], tail).split(b'"traceEvents": [', 1)[1]
    evs, fields = trace_json.finish(body, "t", [])
    assert [e.name for e in evs] == ["a]", 'b"]'] and fields == tail


@pytest.mark.parametrize(
    "body, names, fields",
    [
        (b'{"name": "a"}\n]\n}', ["a"], {}),  # the usual end
        (b'{"name": "a"}]', ["a"], {}),  # a bare array's end, or a document missing its last brace
        (b'\n]\n, "x": [[1], [2]]}', [], {"x": [[1], [2]]}),  # no events
        (b'{"name": "a", "args": {"v": [1, [2]]}}\n], "k": "\\\\"}', ["a"], {"k": "\\"}),
        (
            b'{"name": "a"}], "x": [{"name": "not an event"}]}',
            ["a"],
            {"x": [{"name": "not an event"}]},
        ),
    ],
)
def test_finish_cases(body: bytes, names: list[str], fields: dict):
    evs, got = trace_json.finish(body, "t", [])
    assert [getattr(e, "name", None) or e.get("name") for e in evs] == names and got == fields


def test_lenient_events_before_a_tail_of_arrays():
    body = b'{"name": "a", "v": NaN}\n], "INFO": [{"x": 1}], "E": [["]"]]}'
    evs, fields = trace_json.finish(body, "t", [])
    assert [e["name"] for e in evs] == ["a"] and fields == {"INFO": [{"x": 1}], "E": [["]"]]}


def test_truncated_events_still_say_so():
    from profilers.errors import TraceError

    with pytest.raises(TraceError, match="truncated"):
        trace_json.finish(b'{"name": "a"},\n  {"name": "b", "args": {"v": [1', "t", [])


@pytest.mark.slow
def test_analyze_json_reads_a_trace_with_a_log_tail(tmp_path: Path):
    """At the real reader's sizes (a document larger than ``WHOLE_LIMIT``), as a user runs it."""
    evs = events(steps=8, ops=4500)
    data = kineto_text(evs, log_tail(2000))
    assert len(data) > trace_json.WHOLE_LIMIT
    plain = json.loads(
        analyze(
            str(write_trace(tmp_path / "plain.json.gz", kineto_text(evs, None))), "--json"
        ).stdout
    )
    for name in ("tail.json", "tail.json.gz"):
        done = analyze(str(write_trace(tmp_path / name, data)), "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["step_time_ms"] == plain["step_time_ms"] and result["steps"] == plain["steps"]
