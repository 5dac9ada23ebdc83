"""One table of input kinds (``profilers.inputs``): a kind registered there alone is read by the command line,
accepted by the dashboard's upload path and analysed by the reports.

The new kind here is a real container nobody reads yet: a ``.tar`` of Kineto rank files (what some projects
ship their traces in). Its reader opens the members in memory and hands them to ``load_trace_files``.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Iterator

import pytest

from app.services import uploads
from cli.advisors import main
from profilers import inputs
from profilers.errors import TraceError
from profilers.store.runs import RunStore
from profilers.trace.load import load_trace_files
from profilers.trace.sources import TRACE_SUFFIXES, TraceFile, rank_from_name
from advisors.analysis import analyse
from reports.export import write_report
from tests.trace_factory import kernel, step, write, x


def _read_tar(path: Path):
    with tarfile.open(path) as tf:
        members = {
            m.name: tf.extractfile(m).read()
            for m in tf.getmembers()
            if m.isfile() and m.name.lower().endswith(TRACE_SUFFIXES)
        }
    if not members:
        raise TraceError(f"{path.name}: a tar with no trace files")
    files = [
        TraceFile(f"{path.name}:{n}", rank_from_name(n), lambda b=b: io.BytesIO(b))
        for n, b in members.items()
    ]
    return load_trace_files(files, str(path))


TAR = inputs.InputKind(
    "kineto_tar",
    "a tar of Kineto rank files",
    (".tar",),
    lambda p: p.is_file() and tarfile.is_tarfile(p),
    read=_read_tar,
)


@pytest.fixture
def tar_kind() -> Iterator[inputs.InputKind]:
    inputs.register(TAR)
    try:
        yield TAR
    finally:
        inputs.unregister(TAR.name)


@pytest.fixture
def tar_trace(tmp_path: Path) -> Path:
    src = tmp_path / "ranks"
    src.mkdir()
    for rank in (0, 1):
        events = [
            step(1, 0, 1000),
            x("aten::mm", 10, 400),
            kernel("sm80_gemm", 30, 300 + 100 * rank),
            step(2, 1000, 1000),
            x("aten::mm", 1010, 400),
        ]
        write(src / f"rank{rank}.json", events, distributedInfo={"rank": rank, "world_size": 2})
    out = tmp_path / "job.tar"
    with tarfile.open(out, "w") as tf:
        for p in sorted(src.iterdir()):
            tf.add(p, p.name)
    return out


class _Upload:
    def __init__(self, path: Path) -> None:
        self.name, self._data = path.name, path.read_bytes()

    def getvalue(self) -> bytes:
        return self._data


def test_the_table_is_consistent() -> None:
    names = [k.name for k in inputs.KINDS]
    assert (
        len(names) == len(set(names)) and names[-1] == "kineto"
    )  # the Kineto reader takes what is left
    assert set(inputs.upload_types()) >= {"json", "gz", "zip", "pickle", "pkl"}
    assert all(s.startswith(".") for s in inputs.upload_suffixes())
    with pytest.raises(ValueError):
        inputs.InputKind("bad", "no reader", (".x",), lambda p: False)
    with pytest.raises(ValueError):
        inputs.InputKind("bad", "upper-case suffix", (".X",), lambda p: False, read=lambda p: p)


def test_kinds_of_the_usual_inputs(tmp_path: Path, shared_traces: Path) -> None:
    trace = write(tmp_path / "t.json", [step(1, 0, 10)])
    assert inputs.kind_of(trace).name == "kineto"
    assert (
        inputs.kind_of(shared_traces / "memory/cs336_memory_snapshot.pickle").name
        == "memory_snapshot"
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"kind": "run"}))
    assert inputs.kind_of(run).name == "run"
    (run / "manifest.json").write_text(json.dumps({"kind": "upload"}))
    (run / "trace").mkdir()
    write(run / "trace" / "t.json", [step(1, 0, 10)])
    kind, inner, containers = inputs.resolve(run)
    assert (kind.name, inner, [c.name for c in containers]) == (
        "kineto",
        run / "trace" / "t.json",
        ["upload"],
    )


def test_containers_nested_without_end_are_refused(tmp_path: Path) -> None:
    loop = inputs.InputKind(
        "loop", "a container holding itself", (), lambda p: p.suffix == ".loop", unwrap=lambda p: p
    )
    inputs.register(loop)
    try:
        with pytest.raises(TraceError, match="nested"):
            inputs.resolve(tmp_path / "x.loop")
    finally:
        inputs.unregister("loop")


def test_a_new_kind_before_it_is_registered_is_refused(
    tar_trace: Path, tmp_path: Path, capsys
) -> None:
    assert "tar" not in inputs.upload_types()
    assert uploads.refused_name("job.tar") is not None
    assert (
        main(["analyze", str(tar_trace), "--json"]) == 2
    )  # the Kineto reader says why it is no trace
    assert capsys.readouterr().err.startswith("error: ")


def test_a_registered_kind_reaches_the_cli_uploads_and_reports(
    tar_kind, tar_trace: Path, tmp_path: Path, capsys
) -> None:
    # the command line
    assert main(["analyze", str(tar_trace), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ranks"] == [0, 1] and result["steps"] == 2
    # the Upload page's list and the upload path into the run store
    assert "tar" in inputs.upload_types() and uploads.refused_name("job.tar") is None
    store = RunStore(tmp_path / "store")
    outcome = uploads.store_upload(
        store, [_Upload(tar_trace)], lambda p, label: (analyse(p, label), "d")
    )
    assert outcome.ok, outcome.message
    # the reports, through the stored upload (a container holding the tar)
    analysis = analyse(store.path(outcome.run_id))
    assert analysis.label == "job.tar" and analysis.breakdown is not None
    assert analysis.breakdown.ranks == (0, 1) and analysis.n_events == _read_tar(tar_trace).n_events
    assert "job.tar" in write_report(analysis, tmp_path / "r.html").read_text()


def test_an_unknown_suffix_is_refused_with_the_list(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    item = _Upload(write(tmp_path / "trace.txt", [step(1, 0, 10)]))
    outcome = uploads.store_upload(store, [item], lambda p, label: (analyse(p, label), "d"))
    assert not outcome.ok and ".json.gz" in outcome.message and store.list() == []
