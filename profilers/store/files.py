"""File-level helpers of the run store: atomic JSON writes, tolerant JSON/JSONL reads, safe upload copies.

Readers never raise on a damaged file: a missing or corrupt JSON file reads as None, a torn last line of a
JSONL file (a process killed mid-write) is skipped. Uploads are copied, never extracted, with symbolic links
and special files refused and sizes bounded by ``MAX_IMPORT_BYTES`` / ``MAX_IMPORT_FILES``.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

import pandas as pd

from profilers.errors import RunError

MAX_IMPORT_BYTES = int(os.environ.get("STEPWISE_MAX_IMPORT_BYTES", str(2 * 1024**3)))
MAX_IMPORT_FILES = 1024
MAX_IMPORT_DEPTH = 16
_COPY_CHUNK = 1 << 20
STEP_COLUMNS = ("rank", "step", "wall_ms", "loss", "samples", "profiled", "t_unix_ns", "data_ms")
TELEMETRY_COLUMNS = ("t_unix_ns", "t_trace_us", "source")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write strict JSON (NaN → null) to a temp file beside ``path``, fsync it, then ``os.replace``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(_finite(obj), fh, indent=2, allow_nan=False, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink(missing_ok=True)


def read_json(path: Path) -> Any:
    """The parsed file, or None when it is missing or not valid JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` that is a JSON object; torn or foreign lines are skipped."""
    rows: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        pass
    return rows


def _int_array(values: Any) -> pd.arrays.IntegerArray:
    """Nullable int64 without a detour through float (nanosecond timestamps exceed 2**53)."""
    out: list[int | None] = []
    for v in values:
        if isinstance(v, bool) or v is None:
            out.append(None)
        elif isinstance(v, int):
            out.append(v)
        else:
            try:
                f = float(v)
                out.append(int(f) if math.isfinite(f) else None)
            except (TypeError, ValueError):
                out.append(None)
    return pd.array(out, dtype="Int64")


def steps_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Columns ``STEP_COLUMNS``: rank, step (int), wall_ms (ms), loss, samples, profiled (bool), t_unix_ns, data_ms
    (ms drawing the step's batches; NaN in runs that did not record it)."""
    df = pd.DataFrame.from_records(rows, columns=list(STEP_COLUMNS))
    df["rank"] = _int_array(df["rank"])
    df["step"] = _int_array(df["step"])
    df = df.dropna(subset=["rank", "step"])
    for col in ("wall_ms", "loss", "samples", "data_ms"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    df["profiled"] = df["profiled"].map(lambda v: bool(v) if v is not None else False).astype(bool)
    df["t_unix_ns"] = _int_array(df["t_unix_ns"])
    df = df.drop_duplicates(subset=["rank", "step"], keep="last")
    return (
        df.astype({"rank": "int64", "step": "int64"})
        .sort_values(["step", "rank"])
        .reset_index(drop=True)
    )


def telemetry_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Columns t_unix_ns (int), t_trace_us (µs on the trace clock), source, then one column per metric.

    Metrics may sit at the top level of a line or under a ``metrics`` object; numeric ones become floats.
    """
    flat = []
    for row in rows:
        item = {k: row.get(k) for k in TELEMETRY_COLUMNS}
        extra = {k: v for k, v in row.items() if k not in TELEMETRY_COLUMNS and k != "metrics"}
        nested = row.get("metrics")
        for key, value in {**extra, **(nested if isinstance(nested, dict) else {})}.items():
            item[key if key not in TELEMETRY_COLUMNS else f"metric_{key}"] = value
        flat.append(item)
    df = pd.DataFrame.from_records(flat)
    for col in TELEMETRY_COLUMNS:
        if col not in df:
            df[col] = pd.Series(dtype="object")
    df["t_unix_ns"] = _int_array(df["t_unix_ns"])
    df["t_trace_us"] = pd.to_numeric(df["t_trace_us"], errors="coerce").astype("float64")
    metric_cols = [c for c in df.columns if c not in TELEMETRY_COLUMNS]
    for col in metric_cols:
        numeric = pd.to_numeric(df[col], errors="coerce")
        if numeric.notna().sum() == df[col].notna().sum():
            df[col] = numeric.astype("float64")
    return (
        df[[*TELEMETRY_COLUMNS, *metric_cols]]
        .sort_values("t_unix_ns", kind="stable")
        .reset_index(drop=True)
    )


def pid_alive(pid: Any, started_unix: Any = None) -> bool:
    """True when ``pid`` runs and is not a zombie (and, given its start time, is the same process)."""
    import psutil  # only the run store asks about processes: reading a run's files does not

    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started_unix is None or abs(proc.create_time() - float(started_unix)) < 1.0
    except (psutil.Error, TypeError, ValueError):
        return False


def safe_name(name: str) -> str:
    """A file name that cannot escape its folder or hide: letters, digits, ``._-`` only, no leading dot."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name).lstrip(".")[:200]
    return clean or "trace"


class _Budget:
    def __init__(self) -> None:
        self.bytes = 0
        self.files = 0

    def add_file(self, label: str) -> None:
        self.files += 1
        if self.files > MAX_IMPORT_FILES:
            raise RunError(
                f"{label}: more than {MAX_IMPORT_FILES} files in the upload; refusing it"
            )

    def add_bytes(self, n: int, label: str) -> None:
        self.bytes += n
        if self.bytes > MAX_IMPORT_BYTES:
            raise RunError(
                f"{label}: the upload exceeds {MAX_IMPORT_BYTES // 1024**2} MiB, the stated limit "
                "(STEPWISE_MAX_IMPORT_BYTES)"
            )


def copy_upload(src: Path, dest_dir: Path) -> None:
    """Copy a file or folder ``src`` into the new folder ``dest_dir``. Raises RunError on anything unsafe."""
    try:
        mode = os.lstat(src).st_mode
    except OSError as err:
        raise RunError(f"{src}: cannot be read ({err.strerror})") from None
    if stat.S_ISLNK(mode):
        raise RunError(f"{src.name}: is a symbolic link; refusing it")
    dest_dir.mkdir()
    budget = _Budget()
    if stat.S_ISDIR(mode):
        _copy_tree(src, dest_dir / safe_name(src.name), budget, 0)
    elif stat.S_ISREG(mode):
        budget.add_file(src.name)
        _copy_file(src, dest_dir / safe_name(src.name), budget)
    else:
        raise RunError(f"{src.name}: not a regular file or folder; refusing it")


def _copy_tree(src: Path, dst: Path, budget: _Budget, depth: int) -> None:
    if depth > MAX_IMPORT_DEPTH:
        raise RunError(
            f"{src.name}: folders nested deeper than {MAX_IMPORT_DEPTH}; refusing the upload"
        )
    dst.mkdir()
    with os.scandir(src) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            raise RunError(f"{entry.name}: a symbolic link inside the upload; refusing it")
        if entry.is_dir(follow_symlinks=False):
            _copy_tree(path, dst / safe_name(entry.name), budget, depth + 1)
        elif entry.is_file(follow_symlinks=False):
            budget.add_file(entry.name)
            _copy_file(path, dst / safe_name(entry.name), budget)
        else:
            raise RunError(f"{entry.name}: not a regular file; refusing the upload")


def _copy_file(src: Path, dst: Path, budget: _Budget) -> None:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise RunError(f"{src.name}: cannot be opened safely ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fin:
        info = os.fstat(fin.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise RunError(f"{src.name}: not a regular file; refusing it")
        if budget.bytes + info.st_size > MAX_IMPORT_BYTES:
            budget.add_bytes(info.st_size, src.name)
        try:
            fout = open(dst, "xb")
        except FileExistsError:
            raise RunError(
                f"{src.name}: two files in the upload share the name {dst.name!r}"
            ) from None
        with fout:
            while chunk := fin.read(_COPY_CHUNK):
                budget.add_bytes(len(chunk), src.name)
                fout.write(chunk)
