"""Hostile and broken inputs: each gets a TraceError naming the problem (or is read with the broken parts
dropped and counted); nothing else escapes. A property-based test mutates real traces at random."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import profilers.trace.sources as trace_sources
from profilers.trace.breakdown import breakdown
from profilers.errors import TraceError
from profilers.trace.load import load_trace
from tests.trace_factory import memory, step, write, x

pytestmark = (
    pytest.mark.real_parse
)  # the loader's own tests: every load parses (tests/trace_memo.py)

GOOD = [step(1, 0, 100), x("aten::mm", 5, 10)]


def _doc(events: list) -> bytes:
    return orjson.dumps({"traceEvents": events})


# (file name, content, expected: "error:<regex>" or "ok:<events kept>")
CASES = [
    ("empty.json", b"", "error:empty"),
    ("spaces.json", b"   \n ", "error:empty"),
    ("random.bin", bytes(range(256)) * 4, "error:not JSON"),
    ("array_of_numbers.json", b"[1, 2, 3]", "error:no usable trace events"),
    ("number.json", b"3.14", "error:not JSON"),
    ("object.json", b"{}", "error:no 'traceEvents'"),
    ("events_is_dict.json", b'{"traceEvents": {"a": 1}}', "error:not a list"),
    ("events_is_string.json", b'{"traceEvents": "x"}', "error:not a list"),
    (
        "deep.json",
        b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
        "error:not valid JSON",
    ),
    ("truncated.json", _doc(GOOD)[:-7], "error:not valid JSON"),
    (
        "missing_fields.json",
        _doc([step(1, 0, 100), {"ph": "X", "name": "a"}, {"ph": "X", "ts": 1, "dur": 2}]),
        "ok:1",
    ),
    (
        "string_times.json",
        _doc([step(1, 0, 100), {"ph": "X", "name": "a", "ts": "5", "dur": "x"}]),
        "ok:1",
    ),
    (
        "nan_inf.json",
        b'{"traceEvents": ['
        + orjson.dumps(step(1, 0, 100))
        + b', {"ph": "X", "name": "a", "ts": NaN, "dur": 1}, {"ph": "X", "name": "b", "ts": 1, "dur": Infinity}]}',
        "ok:1",
    ),
    ("negative.json", _doc([step(1, 0, 100), x("neg", 5, -10)]), "ok:1"),
    (
        "long_name.json",
        _doc([step(1, 0, 100), x("n" * 100_000, 5, 10)]),
        "ok:2",
    ),  # 10 MB: test_huge_name
    ("non_utf8.json", _doc(GOOD).replace(b"aten::mm", b"aten::\xff\xfemm"), "ok:2"),
    ("dup_steps.json", _doc([step(1, 0, 100), step(1, 200, 100), x("aten::mm", 5, 10)]), "ok:3"),
    (
        "only_metadata.json",
        _doc([{"ph": "M", "name": "process_name", "args": {"name": "x"}}]),
        "error:no usable trace events",
    ),
    (
        "big_ints.json",
        b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "args": {"id": '
        + b"9" * 40
        + b"}}]}",
        "ok:1",
    ),
    # Numbers no real trace holds: a step id beyond int64 is refused; times beyond int64 ns drop their event.
    (
        "step_id_20_digits.json",
        _doc([step(99999999999999999999, 0, 100), GOOD[1]]),
        "error:step id does not fit",
    ),
    ("step_id_2_63.json", _doc([step(2**63, 0, 100), GOOD[1]]), "error:step id does not fit"),
    (
        "step_id_4300_digits.json",
        _doc([x("ProfilerStep#" + "9" * 5000, 0, 100, cat="user_annotation"), GOOD[1]]),
        "error:step id does not fit",
    ),
    ("ts_1e300.json", _doc([*GOOD, x("far", 1e300, 1)]), "ok:2"),
    ("ts_minus_1e300.json", _doc([*GOOD, x("far", -1e300, 1)]), "ok:2"),
    ("dur_1e300.json", _doc([*GOOD, x("long", 5, 1e300)]), "ok:2"),
    ("step_ts_1e300.json", _doc([step(1, 1e300, 100), GOOD[1]]), "ok:1"),
    ("memory_ts_1e300.json", _doc([*GOOD, {**memory(10, 1, 1), "ts": 1e300}]), "ok:2"),
    (
        "rank_infinity.json",
        b'{"distributedInfo": {"rank": Infinity, "world_size": 1e300}, "deviceProperties": '
        b'[{"id": 1e300, "totalGlobalMem": -Infinity}], "traceEvents": '
        + orjson.dumps(GOOD)
        + b"}",
        "ok:2",
    ),
    (
        "rank_beyond_int32.json",
        orjson.dumps({"distributedInfo": {"rank": 3_000_000_000}, "traceEvents": GOOD}),
        "ok:2",
    ),
]


@pytest.mark.filterwarnings(
    "error"
)  # numpy overflow / invalid-cast warnings are a silent nonsense result
@pytest.mark.parametrize("name, content, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_trace_table(tmp_path: Path, name: str, content: bytes, expected: str):
    p = tmp_path / name
    p.write_bytes(content)
    kind, _, detail = expected.partition(":")
    if kind == "error":
        with pytest.raises(TraceError, match=detail):
            load_trace(p)
    else:
        tr = load_trace(p)
        assert tr.n_events == int(detail)
        breakdown(tr)  # and the analysis copes with what was kept


@pytest.mark.filterwarnings("error")
def test_a_ten_megabyte_name_is_kept_shortened_and_analysed(tmp_path: Path):
    """The name classifiers scan whole names: a 10 MB name cost ~25 s of them on 2 cores (measured:
    benchmarks/results/test-lane-2026-11-23.md). A name beyond 64 kB is kept, shortened, and said; two long
    names with the same start stay two."""
    long_a, long_b = "n" * 10_000_000, "n" * 9_000_000 + "m"
    tr = load_trace(
        write(
            tmp_path / "huge_name.json",
            [step(1, 0, 100), x(long_a, 5, 10), x(long_b, 20, 10), x(long_a, 40, 10)],
        )
    )
    assert tr.n_events == 4
    names = sorted(set(tr.events["name"].astype(str)) - {"ProfilerStep#1"})
    assert len(names) == 2 and all(
        len(n) < 70_000 and n.startswith("n" * 65_536 + "… [") for n in names
    )
    assert "10000000 characters" in names[0] + names[1]
    assert any("2 event name(s) longer than 64 kB kept shortened" in w for w in tr.warnings), (
        tr.warnings
    )
    assert breakdown(tr).ops["count"].sum() == 3


def test_step_ids_are_exact_int64(tmp_path: Path):
    """Ids beyond int32 (which wrapped negative and lost their step) and up to int64's max are kept exactly."""
    top = 2**63 - 1
    events = [
        step(3_000_000_000, 0, 100),
        step(top, 100, 100),
        x("aten::mm", 5, 10),
        x("aten::add", 105, 10),
    ]
    tr = load_trace(write(tmp_path / "t.json", events))
    assert tr.steps["step"].tolist() == [3_000_000_000, top]
    steps = dict(zip(tr.events["name"].astype(str), tr.events["step"]))
    assert steps["aten::mm"] == 3_000_000_000 and steps["aten::add"] == top
    b = breakdown(tr)
    assert b.n_steps == 2 and b.category_ns()["forward"] == 20_000 and b.ops["count"].sum() == 2


def test_times_beyond_int64_ns_are_dropped_and_said(tmp_path: Path):
    events = [
        step(1, 0, 100),
        x("aten::mm", 5, 10),
        x("far", 1e300, 1),
        x("long", 5, 1e300),
        x("edge", 2.0**62 / 1000, 0),
        x("fine", 2.0**61 / 1000, 1),
    ]
    tr = load_trace(write(tmp_path / "t.json", events))
    assert sorted(tr.events["name"].astype(str)) == ["ProfilerStep#1", "aten::mm", "fine"]
    assert any("3 ts or ts+dur beyond ±2**62 ns" in w for w in tr.warnings), tr.warnings
    assert breakdown(tr).step_time_ms == pytest.approx(0.1)


def test_duplicate_step_ids_keep_first_and_warn(tmp_path: Path):
    tr = load_trace(write(tmp_path / "t.json", [step(1, 0, 100), step(1, 200, 100)]))
    assert len(tr.steps) == 1 and int(tr.steps["start_ns"].iloc[0]) == 0
    assert any("duplicate ProfilerStep" in w for w in tr.warnings)


def test_zip_with_thousands_of_entries(tmp_path: Path):
    p = tmp_path / "many.zip"
    with zipfile.ZipFile(p, "w") as z:
        for i in range(trace_sources.MAX_ZIP_ENTRIES + 1):
            z.writestr(f"f{i}.txt", b"")
    with pytest.raises(TraceError, match="entries"):
        load_trace(p)


def test_zip_that_is_not_a_zip(tmp_path: Path):
    p = tmp_path / "fake.zip"
    p.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(TraceError, match="zip"):
        load_trace(p)


def test_gzip_bomb_stops_at_the_limit(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(trace_sources, "MAX_TRACE_BYTES", 4 * 1024**2)
    p = tmp_path / "bomb.json.gz"
    with gzip.open(p, "wb", compresslevel=9) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(64):
            fh.write(b" " * 1024**2)  # 64 MiB of nothing compresses to ~64 KiB
    assert p.stat().st_size < 200 * 1024
    with pytest.raises(TraceError, match="stated limit"):
        load_trace(p)


SEEDS = [
    "edge/hta_amd_mi250_rocm_minitoy.json.gz",
    "compute/tracelens_gemm_01_compute_few_tiles.json",
    "edge/kineto_old_schema_gpu_metrics.json",
]


def _seed_bytes(shared: Path, rel: str) -> bytes:
    raw = (shared / rel).read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.sampled_from(SEEDS), data=st.data())
@pytest.mark.slow
def test_mutated_real_traces_never_crash(tmp_path_factory, shared_traces: Path, seed: str, data):
    raw = bytearray(_seed_bytes(shared_traces, seed))
    for _ in range(data.draw(st.integers(1, 6), label="mutations")):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "delete", "dup"]), label="op")
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
        if op == "flip" and raw:
            raw[at] = data.draw(st.integers(0, 255), label="byte")
        elif op == "cut":
            del raw[at:]
        elif op == "insert":
            raw[at:at] = data.draw(
                st.sampled_from([b"{", b"]", b'"', b",", b"NaN", b"-1e999", b"\xff", b"null"])
            )
        elif op == "delete":
            del raw[at : at + data.draw(st.integers(1, 64), label="n")]
        elif op == "dup":
            raw[at:at] = raw[at : at + 200]
    p = tmp_path_factory.mktemp("fuzz") / "mutated.json"
    p.write_bytes(bytes(raw))
    try:
        tr = load_trace(p)
    except TraceError as err:
        assert str(err) and "\n" not in str(err)
        return
    b = breakdown(tr)
    assert abs(sum(b.shares().values()) - 1.0) < 1e-6 or b.total_step_ns == 0


def _stdlib_inflater(monkeypatch) -> None:
    import zlib

    monkeypatch.setattr(trace_sources, "_GzipFile", gzip.GzipFile)
    monkeypatch.setattr(trace_sources, "_InflateError", zlib.error)


@pytest.mark.parametrize(
    "damage", ["none", "truncated", "bad_block", "bad_crc", "bad_length", "bad_method"]
)
def test_both_inflaters_read_the_same_and_fail_the_same(tmp_path: Path, monkeypatch, damage: str):
    """ISA-L's gzip reader (when installed) and the standard library's give the same trace, and turn every kind
    of damage into the same TraceError ("corrupt or truncated"), never another exception."""
    data = gzip.compress(
        _doc([step(1, 0, 10**6)] + [x(f"op{i}", 10 + i, 5) for i in range(5000)]), mtime=0
    )
    damaged = {
        "none": data,
        "truncated": data[: len(data) // 2],
        "bad_block": data[:10] + bytes(b ^ 0xFF for b in data[10:40]) + data[40:],
        "bad_crc": data[:-8] + bytes(4) + data[-4:],
        "bad_length": data[:-4] + bytes(4),
        "bad_method": data[:2] + b"\x07" + data[3:],
    }[damage]
    p = tmp_path / "t.json.gz"
    p.write_bytes(damaged)
    outcomes = []
    for inflater in ("installed", "stdlib"):
        if inflater == "stdlib":
            _stdlib_inflater(monkeypatch)
        try:
            outcomes.append(("ok", load_trace(p).events.shape))
        except TraceError as err:
            outcomes.append(("error", str(err).split("(")[0]))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0][0] == "ok") == (damage == "none"), outcomes
