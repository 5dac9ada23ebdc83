"""Pinned baselines: a name that points at one run of the store (``compare baseline:NAME NEW``).

Kept beside the runs, one small file per name, written atomically: ``<root>/baselines/<name>.json`` holding
``name``, ``run_id``, ``pinned_unix`` and ``previous`` (the run it pointed at before, if any). One file per
name means two CI jobs pinning different names never overwrite each other; pinning a name again moves it (a
faster main branch becomes the new bar). The run folders stay the truth: a baseline whose run was deleted
reads as a clear error, never as another run.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from profilers.errors import RunError
from profilers.store.runs import RunStore
from profilers.store.files import read_json, write_json_atomic

FOLDER = "baselines"
PREFIX = "baseline:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Baseline:
    name: str
    run_id: str
    pinned_unix: float
    previous: str | None = None  # the run this name pointed at before it was pinned again


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise RunError(
            f"{name!r} is not a baseline name: use letters, digits, '_', '-' or '.', "
            "starting with a letter or digit, at most 64 characters"
        )
    return name


def pin(store: RunStore, name: str, run_id: str) -> Baseline:
    """Point ``name`` at ``run_id`` (a run of ``store``); replaces what the name pointed at before."""
    check_name(name)
    store.get(run_id)  # RunError when the store has no such run
    folder = store.root / FOLDER
    folder.mkdir(exist_ok=True)
    old = _read(store, name)
    baseline = Baseline(
        name=name, run_id=run_id, pinned_unix=time.time(), previous=old.run_id if old else None
    )
    write_json_atomic(
        folder / f"{name}.json",
        {
            "name": name,
            "run_id": run_id,
            "pinned_unix": baseline.pinned_unix,
            "previous": baseline.previous,
        },
    )
    return baseline


def get(store: RunStore, name: str) -> Baseline:
    """The baseline ``name``; RunError when it was never pinned or its run is gone from the store."""
    check_name(name)
    found = _read(store, name)
    if found is None:
        known = ", ".join(b.name for b in list_baselines(store)) or "none yet"
        raise RunError(
            f"no baseline {name!r} in {store.root} (pinned: {known}); "
            f"pin one with: stepwise compare --save-baseline {name} RUN"
        )
    if not store.path(found.run_id).is_dir():
        raise RunError(
            f"baseline {name!r} points at run {found.run_id}, which is no longer in {store.root}; "
            "pin it again"
        )
    return found


def run_dir(store: RunStore, name: str) -> Path:
    return store.path(get(store, name).run_id)


def list_baselines(store: RunStore) -> list[Baseline]:
    folder = store.root / FOLDER
    if not folder.is_dir():
        return []
    return [b for p in sorted(folder.glob("*.json")) if (b := _read(store, p.stem)) is not None]


def _read(store: RunStore, name: str) -> Baseline | None:
    data = read_json(store.root / FOLDER / f"{name}.json")
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None
    return Baseline(
        name=name,
        run_id=data["run_id"],
        pinned_unix=float(data.get("pinned_unix") or 0.0),
        previous=data.get("previous") if isinstance(data.get("previous"), str) else None,
    )
