"""Readers: every input layout, chunked parsing identical to whole parsing, and clear errors."""

from __future__ import annotations

import gzip
import random
import stat
import zipfile
from pathlib import Path

import orjson
import pytest

import profilers.trace.json_events as trace_json
import profilers.trace.sources as trace_sources
from profilers.trace.breakdown import breakdown
from profilers.errors import TraceError
from profilers.trace.load import load_trace
from tests.trace_factory import kernel, step, write, x

pytestmark = (
    pytest.mark.real_parse
)  # the loader's own tests: every load parses (tests/trace_memo.py)


def small_trace(rank: int | None = None) -> dict:
    top = {"distributedInfo": {"rank": rank, "world_size": 2}} if rank is not None else {}
    return {
        "schemaVersion": 1,
        **top,
        "traceEvents": [step(1, 0, 100), kernel("sgemm", 10, 50), x("aten::mm", 5, 10)],
    }


def test_json_gz_and_pt_trace_names(tmp_path: Path):
    plain = tmp_path / "a.json"
    plain.write_bytes(orjson.dumps(small_trace()))
    gz = tmp_path / "worker0.1623143089861.pt.trace.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    for p in (plain, gz):
        assert load_trace(p).n_events == 3


def test_folder_ranks_from_distributed_info_and_names(tmp_path: Path):
    for r in (1, 0):
        (tmp_path / f"host.{r}.pt.trace.json").write_bytes(orjson.dumps(small_trace(rank=r)))
    assert load_trace(tmp_path).ranks == (0, 1)
    other = tmp_path / "named"
    other.mkdir()
    for r in (3, 5):
        (other / f"rank-{r}.json").write_bytes(orjson.dumps(small_trace()))
    assert load_trace(other).ranks == (3, 5)


def test_tensorboard_logdir_reads_newest_session(tmp_path: Path):
    for session, n in (("20240101", 1), ("20240102", 2)):
        d = tmp_path / "plugins" / "profile" / session
        d.mkdir(parents=True)
        for r in range(n):
            (d / f"host_{r}.pt.trace.json.gz").write_bytes(
                gzip.compress(orjson.dumps(small_trace(rank=r)))
            )
    assert load_trace(tmp_path).ranks == (0, 1)


def test_zipped_tensorboard_logdir_reads_newest_session_like_the_folder(tmp_path: Path):
    """run0 holds rank 7 alone, run1 ranks 0-3: the zip reads run1 only, as the unzipped folder does."""
    logdir = tmp_path / "logdir"
    for session, ranks in (("run0", [7]), ("run1", [0, 1, 2, 3])):
        d = logdir / "plugins" / "profile" / session
        d.mkdir(parents=True)
        for r in ranks:
            (d / f"host_{r}.pt.trace.json.gz").write_bytes(
                gzip.compress(orjson.dumps(small_trace(rank=r)))
            )
    zipped = tmp_path / "logdir.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for f in sorted(logdir.rglob("*.gz")):
            z.write(f, f.relative_to(tmp_path).as_posix())
    assert load_trace(zipped).ranks == load_trace(logdir).ranks == (0, 1, 2, 3)


def test_zip_of_ranks_and_unsafe_zips(tmp_path: Path):
    good = tmp_path / "ranks.zip"
    with zipfile.ZipFile(good, "w") as z:
        for r in range(2):
            z.writestr(f"run/rank{r}.pt.trace.json", orjson.dumps(small_trace(rank=r)))
    assert load_trace(good).ranks == (0, 1)
    for bad_name in ("../evil.pt.trace.json", "/abs/evil.pt.trace.json"):
        bad = tmp_path / "bad.zip"
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr(bad_name, orjson.dumps(small_trace()))
        with pytest.raises(TraceError, match="unsafe path"):
            load_trace(bad)
    link = tmp_path / "link.zip"
    with zipfile.ZipFile(link, "w") as z:
        info = zipfile.ZipInfo("rank0.pt.trace.json")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(TraceError, match="symbolic link"):
        load_trace(link)


@pytest.mark.parametrize("one_line", [False, True])
def test_chunked_parsing_equals_whole_parsing(
    tmp_path: Path, shared_traces: Path, monkeypatch, one_line: bool
):
    src = shared_traces / "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz"
    whole = breakdown(load_trace(src))
    if one_line:  # same events, written without the Kineto line layout
        doc = orjson.loads(gzip.decompress(src.read_bytes()))
        src = tmp_path / "one_line.json"
        src.write_bytes(orjson.dumps(doc))
    monkeypatch.setattr(trace_json, "WHOLE_LIMIT", 256 * 1024)
    monkeypatch.setattr(trace_json, "CHUNK_BYTES", 256 * 1024)
    chunked = breakdown(load_trace(src))
    assert chunked.per_step.equals(whole.per_step)
    assert chunked.kernels.equals(whole.kernels)


def test_broken_events_are_dropped_and_counted(tmp_path: Path):
    events = [
        step(1, 0, 100),
        x("aten::mm", 5, 10),
        {"ph": "X", "name": "no_ts", "dur": 5},
        x("neg", 1, -3),
        {"ph": "X", "name": "s", "ts": "12", "dur": 1},
        7,
    ]
    tr = load_trace(write(tmp_path / "t.json", events))
    assert tr.n_events == 2
    warning = " ".join(tr.warnings)
    assert "negative duration" in warning and "missing or non-numeric ts/dur" in warning


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (random.Random(119).randbytes(64).replace(b"{", b"x").replace(b"[", b"x"), "not JSON"),
        (b"[1, 2", "not valid JSON"),
        (b"{}", "no 'traceEvents'"),
        (b"42", "not JSON"),
        (b'{"traceEvents": 5}', "not a list"),
        (b'{"traceEvents": [{"ph": "M"}]}', "no usable trace events"),
        (b"[" * 5000 + b"]" * 5000, "not valid JSON"),
    ],
)
def test_bad_inputs_get_clear_errors(tmp_path: Path, content: bytes, message: str):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        load_trace(p)


def test_truncated_gzip_and_gzip_bomb(tmp_path: Path, monkeypatch):
    data = gzip.compress(orjson.dumps(small_trace()))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="corrupt or truncated"):
        load_trace(cut)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (8 * 1024**2) + b"]}"))
    monkeypatch.setattr(trace_sources, "MAX_TRACE_BYTES", 1024**2)
    with pytest.raises(TraceError, match="stated limit"):
        load_trace(bomb)


def test_missing_path(tmp_path: Path):
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.json")
    with pytest.raises(TraceError, match="no trace files"):
        load_trace(tmp_path)
