"""The run store's SQLite index: one row per run folder, a cache of what the folders say (rebuilt at will).

WAL mode and a busy timeout, so several runs and dashboard sessions share it. A corrupt index, or one of
another schema version, is set aside (corrupt) or dropped (outdated) and its owner refills it from the folders:
:meth:`RunIndex.open` says when. The folders stay the truth (:mod:`profilers.store.runs`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Iterable

from profilers.run.records import RunRecord, RunStatus

INDEX_FILE = "index.sqlite"
SCHEMA_VERSION = 2  # 2: experiments as stored objects (parent, role, source_run)
COLUMNS = (
    "run_id",
    "kind",
    "label",
    "workload",
    "status",
    "created_unix",
    "finished_unix",
    "step_time_ms",
    "samples_per_s",
    "peak_memory_mb",
    "world_size",
    "device",
    "error",
    "pid",
    "parent",
    "role",
    "source_run",
)


class RunIndex:
    """The index file ``path`` of the run folders under ``root`` (a row's ``run_dir`` is ``root / run_id``)."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = path, root
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def open(self) -> bool:
        """Create or check the index; a corrupt or outdated one is set aside. True when it must be filled."""
        try:
            return self._ensure_schema()
        except sqlite3.DatabaseError:
            os.replace(self.path, self.path.with_name(f"{INDEX_FILE}.corrupt-{int(time.time())}"))
            return self._ensure_schema()

    def get(self, run_id: str) -> RunRecord | None:
        with closing(self._db()) as db:
            row = db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else self._record(row)

    def select(
        self, where: Iterable[str] = (), args: Iterable[str | int] = (), limit: int | None = None
    ) -> list[RunRecord]:
        """Rows matching every ``where`` clause (``?`` placeholders filled from ``args``), newest first."""
        clauses = list(where)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(clauses) if clauses else "")
        sql += " ORDER BY created_unix DESC, run_id DESC" + (
            " LIMIT ?" if limit is not None else ""
        )
        with closing(self._db()) as db:
            rows = db.execute(sql, (*args, *([limit] if limit is not None else []))).fetchall()
        return [self._record(r) for r in rows]

    def run_ids(self) -> set[str]:
        with closing(self._db()) as db:
            return {r[0] for r in db.execute("SELECT run_id FROM runs")}

    def upsert(self, record: RunRecord) -> None:
        values = [getattr(record, c) for c in COLUMNS]
        values[COLUMNS.index("status")] = record.status.value
        with closing(self._db()) as db:
            db.execute(
                f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) VALUES "
                f"({', '.join('?' * len(COLUMNS))})",
                values,
            )

    def delete(self, run_id: str) -> None:
        with closing(self._db()) as db:
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    def clear(self) -> None:
        with closing(self._db()) as db:
            db.execute("DELETE FROM runs")

    def _record(self, row: sqlite3.Row) -> RunRecord:
        data = {k: row[k] for k in COLUMNS}
        data["status"] = RunStatus.parse(data["status"])
        return RunRecord(run_dir=str(self.root / row["run_id"]), **data)

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 30000")
        db.row_factory = sqlite3.Row
        return db

    def _ensure_schema(self) -> bool:
        with closing(self._db()) as db:
            db.execute("PRAGMA journal_mode = WAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == SCHEMA_VERSION:
                return False
            db.execute("DROP TABLE IF EXISTS runs")
            db.execute(
                "CREATE TABLE runs (run_id TEXT PRIMARY KEY, kind TEXT, label TEXT, workload TEXT, status TEXT,"
                " created_unix REAL, finished_unix REAL, step_time_ms REAL, samples_per_s REAL,"
                " peak_memory_mb REAL, world_size INTEGER, device TEXT, error TEXT, pid INTEGER, parent TEXT,"
                " role TEXT, source_run TEXT)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS runs_created ON runs (created_unix)")
            db.execute("CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent)")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return True
