"""The run store: one folder per run (the truth) and a SQLite index of them (a cache, rebuilt at will).

Layout under the root (``$STEPWISE_HOME``, else ``./runs``)::

    index.sqlite             WAL mode, busy timeout: several runs and dashboard sessions share it
                             (elsewhere with ``$STEPWISE_INDEX`` or ``RunStore(root, index=...)``: e.g. run
                             folders on shared storage, where SQLite's locking is unreliable, and the
                             index on a local disk; it is rebuilt from the folders when missing)
    <run_id>/manifest.json   the store's own record: kind, label, workload, created, pid, status
    <run_id>/spec.json ...   spec, steps.jsonl, telemetry.jsonl, progress.json, tb/, result.json
    .tmp-<run_id>/           a run under construction: never listed, renamed into place when complete

Every file the store writes is written atomically (temp file + ``os.replace``). ``reindex()`` rebuilds the
index from the folders; ``recover()`` settles runs whose process is gone. File-level reading, writing and
upload copying live in :mod:`profilers.store.files`, the index in :mod:`profilers.store.index`.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import pandas as pd

from profilers.errors import RunError
from profilers.run.records import RUN_KINDS, RunRecord, RunResult, RunStatus, summarise_steps
from profilers.store.index import COLUMNS, INDEX_FILE, RunIndex
from profilers.run.step_records import step_rows
from profilers.store.files import (
    copy_upload,
    pid_alive,
    read_json,
    read_jsonl,
    safe_name,
    steps_frame,
    telemetry_frame,
    write_json_atomic,
)

STORE_ENV = "STEPWISE_HOME"
INDEX_ENV = "STEPWISE_INDEX"
MANIFEST = "manifest.json"
CANCEL_FILE = "cancel.json"
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
STALE_START_S = 120.0  # a `running` run still without a pid after this long never started
STALE_TMP_S = 3600.0  # construction folders older than this are leftovers of a crash
_RUN_ID = re.compile(r"^\d{8}-\d{6}-[a-z0-9_]{1,40}-[0-9a-f]{4}$")
_UPDATABLE = frozenset(COLUMNS) - {"run_id", "kind", "created_unix"} | {"pid_started"}


class StoredSpec(Protocol):
    """What the store reads of a spec (an object with a workload, ranks and a JSON form): its workload and ranks for
    the index, its JSON for ``spec.json``."""

    @property
    def workload(self) -> str: ...

    @property
    def world_size(self) -> int: ...

    def to_json(self) -> str: ...


def default_root() -> Path:
    """``$STEPWISE_HOME``, else ``./runs`` of the folder the command started in, as an absolute path."""
    return resolve_root(os.environ.get(STORE_ENV) or "runs")


def resolve_root(root: Path | str) -> Path:
    """A store root as an absolute path, resolved once where the store is opened: runs start in folders of their
    own (a workload in its code folder, a script in its ``cwd``), so every path handed to them must be absolute."""
    return Path(root).expanduser().resolve()


class RunStore:
    """Run folders under ``root`` plus their index. Safe to use from several threads and processes."""

    def __init__(self, root: Path | str | None = None, index: Path | str | None = None) -> None:
        self.root = resolve_root(root) if root is not None else default_root()
        self.root.mkdir(parents=True, exist_ok=True)
        index = index if index is not None else os.environ.get(INDEX_ENV) or None
        self._index = RunIndex(
            resolve_root(index) if index is not None else self.root / INDEX_FILE, self.root
        )
        if self._index.open():
            self.reindex()

    # -- creating ------------------------------------------------------------------------------------------
    def create(
        self,
        kind: str,
        label: str | None = None,
        spec: StoredSpec | Mapping[str, Any] | None = None,
        files: Mapping[str, Any] | None = None,
        parent: str | None = None,
        role: str | None = None,
        source_run: str | None = None,
        world_size: int | None = None,
    ) -> RunRecord:
        """A new run folder, status ``running``, listed only once complete: ``spec.json`` when a spec is given
        (a spec, or its dict form) and ``files`` (name → JSON value, e.g. the launcher's ``launch.json``) are
        written before. ``parent`` and ``role``: a trial run of an experiment; ``source_run``: the run an
        experiment was started from; ``world_size``: the ranks started (else the spec's, else 1)."""
        data = _spec_dict(spec)
        workload = data.get("workload")
        content = {**({"spec.json": data} if spec is not None else {}), **(files or {})}
        links = {
            k: v for k, v in (("parent", parent), ("role", role), ("source_run", source_run)) if v
        }
        return self._build(
            kind,
            label,
            str(workload) if workload is not None else None,
            RunStatus.RUNNING,
            lambda d: _write_files(d, content),
            world_size=world_size or int(data.get("world_size") or 1),
            **links,
        )

    def import_trace(
        self, src: Path | str, label: str | None = None, content_digest: str | None = None
    ) -> RunRecord:
        """Copy an uploaded trace (file, zip or folder) into a new ``upload`` run under ``trace/``; its
        ``content_digest`` (when given) lets the same content be recognised later (:meth:`find_upload`).

        Only copies, safely: symbolic links and special files are refused, sizes are bounded
        (``store_io.MAX_IMPORT_BYTES``, ``MAX_IMPORT_FILES``). The trace engine validates the content.
        """
        src = Path(src)
        extra = {"content_digest": content_digest} if content_digest else {}
        return self._build(
            "upload",
            label or src.name,
            None,
            RunStatus.OK,
            lambda d: copy_upload(src, d / "trace"),
            source_name=src.name,
            **extra,
        )

    def find_upload(self, content_digest: str) -> RunRecord | None:
        """The stored upload of this very content (the newest), or ``None``."""
        for record in self.list(kind="upload", limit=None):
            if self._manifest(record.run_id).get("content_digest") == content_digest:
                return record
        return None

    def _build(
        self,
        kind: str,
        label: str | None,
        workload: str | None,
        status: RunStatus,
        populate: Callable[[Path], None],
        **extra: Any,
    ) -> RunRecord:
        if kind not in RUN_KINDS:
            raise RunError(f"unknown run kind {kind!r}; expected one of {', '.join(RUN_KINDS)}")
        run_id, tmp = self._claim_id(workload or label or kind)
        now = time.time()
        manifest = {
            "run_id": run_id,
            "kind": kind,
            "label": label or run_id,
            "workload": workload,
            "status": status.value,
            "created_unix": now,
            "finished_unix": None if not status.finished else now,
            "world_size": 1,
            "pid": None,
            **extra,
        }
        try:
            populate(tmp)
            write_json_atomic(tmp / MANIFEST, manifest)
            os.rename(tmp, self.root / run_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        record = self._record_from_folder(self.root / run_id)
        assert record is not None
        self._index.upsert(record)
        return record

    def _claim_id(self, name: str) -> tuple[str, Path]:
        slug = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")[:40] or "run"
        for _ in range(100):
            run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{secrets.token_hex(2)}"
            tmp = self.root / f"{TMP_PREFIX}{run_id}"
            if (self.root / run_id).exists():
                continue
            try:
                tmp.mkdir()
            except FileExistsError:
                continue
            # Look again: a writer that had the same id may have renamed its folder into place between the
            # check above and the mkdir (its temporary name was free again). Holding the temporary folder now,
            # no other writer can finish this id, so a second look that finds it free settles the claim.
            if (self.root / run_id).exists():
                tmp.rmdir()
                continue
            return run_id, tmp
        raise RunError(f"could not allocate a run id under {self.root}")

    # -- changing ------------------------------------------------------------------------------------------
    def update(self, run_id: str, **fields: Any) -> RunRecord:
        """Change index fields of a run (e.g. ``pid``), in its manifest first, then in the index."""
        bad = set(fields) - _UPDATABLE
        if bad:
            raise RunError(f"cannot update {', '.join(sorted(bad))} of a run")
        fields = {k: (v.value if isinstance(v, RunStatus) else v) for k, v in fields.items()}
        manifest = self._manifest(run_id)
        write_json_atomic(self.path(run_id) / MANIFEST, {**manifest, **fields})
        record = self._record_from_folder(self.path(run_id))
        assert record is not None
        self._index.upsert(record)
        return record

    def finish(self, run_id: str, result: RunResult) -> RunRecord:
        """Record a final result: ``result.json`` (merged with what the worker wrote), manifest, index."""
        run_dir = self.path(run_id)
        previous = read_json(run_dir / "result.json")
        merged = {
            **(previous if isinstance(previous, dict) else {}),
            **result.to_dict(),
            "run_id": run_id,
        }
        write_json_atomic(run_dir / "result.json", merged)
        self._finish_progress(run_dir, result)
        return self.update(
            run_id,
            status=result.status,
            finished_unix=result.finished_unix or time.time(),
            error=result.error,
        )

    @staticmethod
    def _finish_progress(run_dir: Path, result: RunResult) -> None:
        """``progress.json`` ends in the run's final status, even when the process was killed before it could
        write one (a reader polling it must never see ``running`` for a run that has ended)."""
        progress = read_json(run_dir / "progress.json")
        if isinstance(progress, dict) and progress.get("status") != result.status.value:
            write_json_atomic(
                run_dir / "progress.json",
                {**progress, "status": result.status.value, "updated_unix": time.time()},
            )

    def delete(self, run_id: str) -> None:
        """Remove a finished run (folder first renamed out of sight, so a half-deleted run is never listed)."""
        record = self.get(run_id)
        if record.status is RunStatus.RUNNING and self._process_alive(run_id):
            raise RunError(f"run {run_id} is still running; cancel it first")
        trash = self.root / f"{TRASH_PREFIX}{run_id}-{secrets.token_hex(2)}"
        os.rename(self.path(run_id), trash)
        self._index.delete(run_id)
        shutil.rmtree(trash, ignore_errors=True)

    # -- reading -------------------------------------------------------------------------------------------
    def path(self, run_id: str) -> Path:
        if not _RUN_ID.match(run_id or ""):
            raise RunError(f"{run_id!r} is not a run id")
        return self.root / run_id

    def get(self, run_id: str) -> RunRecord:
        indexed = self._index.get(run_id)
        if indexed is not None:
            return indexed
        record = self._record_from_folder(self.path(run_id)) if self.path(run_id).is_dir() else None
        if record is None:
            raise RunError(f"no run {run_id} in {self.root}")
        self._index.upsert(record)
        return record

    def list(
        self,
        kind: str | None = None,
        limit: int | None = 200,
        status: RunStatus | None = None,
        trials: bool = True,
        parent: str | None = None,
        source_run: str | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, optionally of one kind and/or status. ``trials=False`` leaves out the trial runs
        of experiments (each experiment is one entry); ``parent``: only that experiment's trials;
        ``source_run``: only the experiments started from that run."""
        where: builtins.list[str] = []
        args: builtins.list[str | int] = []
        if not trials:
            where.append("parent IS NULL")
        if parent is not None:
            where.append("parent = ?")
            args.append(parent)
        if source_run is not None:
            where.append("source_run = ?")
            args.append(source_run)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if status is not None:
            where.append("status = ?")
            args.append(RunStatus(status).value)
        return self._index.select(where, args, limit)

    def read_steps(self, run_id: str) -> pd.DataFrame:
        """``steps.jsonl`` as a frame: rank, step, wall_ms, loss, samples, profiled, t_unix_ns (one row each)."""
        return steps_frame(step_rows(self.path(run_id)))

    def read_telemetry(self, run_id: str) -> pd.DataFrame:
        """``telemetry.jsonl``: t_unix_ns, t_trace_us, source, then one column per metric."""
        return telemetry_frame(read_jsonl(self.path(run_id) / "telemetry.jsonl"))

    def read_progress(self, run_id: str) -> dict[str, Any] | None:
        data = read_json(self.path(run_id) / "progress.json")
        return data if isinstance(data, dict) else None

    def request_cancel(self, run_id: str, reason: str) -> None:
        """Record that someone asked this run to stop (``cancel.json``), before any signal is sent: whoever
        stores the result then says why it ended, and the live view stops counting down at once."""
        write_json_atomic(
            self.path(run_id) / CANCEL_FILE, {"reason": reason, "t_unix": time.time()}
        )

    def read_cancel(self, run_id: str) -> str | None:
        """Why a stop was asked for this run, or None when nobody asked."""
        data = read_json(self.path(run_id) / CANCEL_FILE)
        return str(data.get("reason")) if isinstance(data, dict) and data.get("reason") else None

    def read_result(self, run_id: str) -> RunResult | None:
        data = read_json(self.path(run_id) / "result.json")
        return RunResult.from_dict(data) if isinstance(data, dict) else None

    def read_spec(self, run_id: str) -> dict[str, Any] | None:
        data = read_json(self.path(run_id) / "spec.json")
        return data if isinstance(data, dict) else None

    def salvage(
        self, run_id: str, status: RunStatus, error: str, exit_code: int | None = None
    ) -> RunResult:
        """A result for a run whose process died without a word, from the steps and telemetry gathered."""
        manifest = self._manifest(run_id)
        telemetry = self.read_telemetry(run_id)
        sources = telemetry["source"].dropna().unique().tolist() if "source" in telemetry else []
        return RunResult(
            status=status,
            error=error,
            world_size=int(manifest.get("world_size") or 1),
            started_unix=manifest.get("created_unix"),
            finished_unix=time.time(),
            exit_code=exit_code,
            telemetry_source=sources[0] if sources else None,
            warnings=(
                "the process ended without writing result.json: the figures come from the steps and "
                "telemetry written so far",
            ),
            **summarise_steps(
                self.read_steps(run_id),
                telemetry,
                _warmup(self.read_spec(run_id), read_json(self.path(run_id) / "boot.json")),
            ).result_fields(),
        )

    # -- recovery ------------------------------------------------------------------------------------------
    def recover(self) -> builtins.list[str]:  # builtins: ``list`` here is the method above
        """Settle runs left ``running`` whose process is gone (→ ``killed``, steps kept) or that finished
        while nobody watched (→ their ``result.json``). Idempotent and cheap: call it at startup or on refresh.
        Returns the run ids it changed."""
        self._sync_folders()
        changed = []
        for record in self.list(status=RunStatus.RUNNING, limit=None):
            result = self.read_result(record.run_id)
            if result is not None and result.status.finished:
                self.finish(record.run_id, result)
            elif self._process_alive(record.run_id):
                continue
            elif record.pid is None and time.time() - record.created_unix < STALE_START_S:
                continue
            else:
                why = (
                    "no process was ever recorded"
                    if record.pid is None
                    else f"process {record.pid} is gone"
                )
                self.finish(
                    record.run_id,
                    self.salvage(
                        record.run_id,
                        RunStatus.KILLED,
                        f"the run stopped without a result ({why}); "
                        "it was probably killed or its host restarted",
                    ),
                )
            changed.append(record.run_id)
        return changed

    def reindex(self) -> int:
        """Rebuild the index from the run folders; returns how many runs it holds."""
        self._index.clear()
        return self._sync_folders()

    def _sync_folders(self) -> int:
        indexed = self._index.run_ids()
        present = set()
        for entry in os.scandir(self.root):
            if entry.name.startswith((TMP_PREFIX, TRASH_PREFIX)) and _older_than(
                entry, STALE_TMP_S
            ):
                shutil.rmtree(entry.path, ignore_errors=True)
            if not entry.is_dir(follow_symlinks=False) or not _RUN_ID.match(entry.name):
                continue
            present.add(entry.name)
            if entry.name not in indexed:
                record = self._record_from_folder(Path(entry.path))
                if record is not None:
                    self._index.upsert(record)
                else:
                    present.discard(entry.name)
        for gone in indexed - present:
            self._index.delete(gone)
        return len(present)

    def _process_alive(self, run_id: str) -> bool:
        manifest = self._manifest(run_id)
        return pid_alive(manifest.get("pid"), manifest.get("pid_started"))

    # -- folder ↔ record ------------------------------------------------------------------------------------
    def read_manifest(self, run_id: str) -> dict[str, Any]:
        """The store's own ``manifest.json`` of a run (kind, label, pid, pid_started, …)."""
        return self._manifest(run_id)

    def _manifest(self, run_id: str) -> dict[str, Any]:
        data = read_json(self.path(run_id) / MANIFEST)
        if not isinstance(data, dict):
            raise RunError(f"run {run_id} has no readable {MANIFEST}")
        return data

    def _record_from_folder(self, run_dir: Path) -> RunRecord | None:
        """The record a folder describes, or None when it is not a run folder (never raises)."""
        manifest = read_json(run_dir / MANIFEST)
        if not isinstance(manifest, dict) or manifest.get("run_id") != run_dir.name:
            return None
        result = read_json(run_dir / "result.json")
        result = RunResult.from_dict(result) if isinstance(result, dict) else None
        status = RunStatus.parse(manifest.get("status"))
        if result is not None and result.status.finished and result.status is not status:
            status = result.status if status is RunStatus.RUNNING else status
        try:
            return RunRecord(
                run_id=run_dir.name,
                kind=str(manifest.get("kind", "run")),
                label=str(manifest.get("label") or run_dir.name),
                workload=manifest.get("workload"),
                status=status,
                created_unix=float(manifest.get("created_unix") or 0.0),
                finished_unix=(result.finished_unix if result else None)
                or manifest.get("finished_unix"),
                run_dir=str(run_dir),
                step_time_ms=result.step_time_ms if result else None,
                samples_per_s=result.samples_per_s if result else None,
                peak_memory_mb=result.peak_memory_mb if result else None,
                world_size=(result.world_size if result else None)
                or int(manifest.get("world_size") or 1),
                device=result.device if result else None,
                error=(result.error if result else None) or manifest.get("error"),
                pid=manifest.get("pid"),
                parent=_opt_str(manifest.get("parent")),
                role=_opt_str(manifest.get("role")),
                source_run=_opt_str(manifest.get("source_run")),
            )
        except (TypeError, ValueError):
            return None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _warmup(spec: Mapping[str, Any] | None, boot: Any = None) -> int:
    """The warm-up steps a stored spec (or a launched script's ``boot.json``) asked for (1 when neither names
    any: the first step is always lazy)."""
    asked = (spec or {}).get("warmup_steps") or (
        boot.get("warmup") if isinstance(boot, dict) else None
    )
    try:
        return max(int(asked or 1), 1)
    except (TypeError, ValueError):
        return 1


def _spec_dict(spec: StoredSpec | Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON object ``spec.json`` holds (empty without a spec)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return json.loads(
            json.dumps(dict(spec))
        )  # what a reader will see: JSON types only, never a live object
    data = json.loads(spec.to_json())
    if not isinstance(data, dict):
        raise RunError(f"a spec's JSON must be an object, got {type(data).__name__}")
    return data


def _write_files(folder: Path, files: Mapping[str, Any]) -> None:
    for name, value in files.items():
        write_json_atomic(folder / safe_name(name), value)


def _older_than(entry: os.DirEntry[str], seconds: float) -> bool:
    try:
        return time.time() - entry.stat(follow_symlinks=False).st_mtime > seconds
    except OSError:
        return False
