"""Memory snapshots are read with an unpickler that refuses every class; the real one is summarised."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from profilers.errors import TraceError
from profilers.trace.memory_snapshot import is_snapshot_file, load_memory_snapshot


def test_real_snapshot_summary(shared_traces: Path):
    path = shared_traces / "memory/cs336_memory_snapshot.pickle"
    assert is_snapshot_file(path)
    snap = load_memory_snapshot(path)
    assert snap.segments == 216
    assert snap.reserved_bytes / 2**30 == pytest.approx(13.2, abs=0.05)
    assert (
        snap.peak_allocated_bytes is not None
        and snap.peak_allocated_bytes / 2** 30 == pytest.approx(12.97, abs=0.02)
    )
    assert snap.history_events == 3 * 1721 and snap.oom_events == 0
    assert snap.top_sites and snap.top_sites[0].where.startswith("model.py:")


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/stepwise-pwned",))


def test_malicious_pickle_is_refused_without_running(tmp_path: Path):
    marker = Path("/tmp/stepwise-pwned")
    marker.unlink(missing_ok=True)
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"segments": [_Boom()]}))
    with pytest.raises(TraceError, match="refused to load"):
        load_memory_snapshot(evil)
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload, message",
    [
        (pickle.dumps([1, 2, 3]), "not a torch.cuda.memory snapshot"),
        (pickle.dumps({"segments": []})[:-3], "truncated"),
    ],
)
def test_foreign_or_truncated_pickles(tmp_path: Path, payload: bytes, message: str):
    p = tmp_path / "x.pickle"
    p.write_bytes(payload)
    with pytest.raises(TraceError, match=message):
        load_memory_snapshot(p)
