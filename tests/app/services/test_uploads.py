"""The same file uploaded twice is recognised by its content: the stored upload is opened, nothing stored twice
(issue 42)."""

from __future__ import annotations

from pathlib import Path

from app.services import uploads
from profilers.store.runs import RunStore
from advisors.analysis import analyse
from profilers.store.fingerprint import content_digest
from tests.trace_factory import step, write


class _Upload:
    def __init__(self, path: Path, name: str | None = None) -> None:
        self.name, self._data = name or path.name, path.read_bytes()

    def getvalue(self) -> bytes:
        return self._data


def _validate(path: Path, label: str):
    return analyse(path, label=label), content_digest(str(path))


def test_the_same_content_twice_opens_the_stored_upload(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "store")
    trace = write(tmp_path / "a.json", [step(1, 0, 10), step(2, 10, 20)])
    first = uploads.store_upload(store, [_Upload(trace)], _validate)
    again = uploads.store_upload(store, [_Upload(trace, "renamed.json")], _validate)
    assert first.ok and again.ok and again.run_id == first.run_id
    assert "nothing stored twice" in again.message and len(store.list(kind="upload")) == 1
    other = write(tmp_path / "b.json", [step(1, 0, 12), step(2, 12, 30)])
    third = uploads.store_upload(store, [_Upload(other)], _validate)
    assert third.ok and third.run_id != first.run_id and len(store.list(kind="upload")) == 2
