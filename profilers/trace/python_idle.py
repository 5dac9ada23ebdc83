"""Which Python functions hold the GPU idle: read from the ``python_function`` events of a ``with_stack`` trace.

Each Python frame's *own* idle time is the GPU-idle time inside its span that none of its callees (deeper
``python_function`` events on its thread) covers; that time is charged to the nearest frame of the user's own
code (not the standard library, site-packages, torch, or a built-in) on its stack, so a user function that calls
``time.sleep`` or a slow library routine is the one named. Kineto names a frame ``path(line): function``;
:func:`where` turns that into ``function (file:line)``.

Table (``Breakdown.python_idle``): ``name`` (the frame as recorded), ``idle_ns`` (GPU-idle time charged to it,
inside steps, over all ranks), sorted by ``idle_ns`` descending.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from profilers.trace.intervals import Intervals

COLUMNS = ["name", "idle_ns"]
_FRAME = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
_LIBRARY = re.compile(
    r"site-packages|dist-packages|[/\\]lib[/\\]python\d|^torch[/\\]|[/\\]torch[/\\]|^<frozen|"
    r"^<built-in|^nn\.Module:|^(?:threading|contextlib|functools|runpy|asyncio[/\\].*)\.py\("
)


def empty() -> pd.DataFrame:
    return pd.DataFrame({"name": pd.Series(dtype=str), "idle_ns": pd.Series(dtype=np.int64)})


def is_user_frame(name: str) -> bool:
    """A frame of the user's own code: ``path(line): function`` outside libraries and built-ins."""
    return bool(_FRAME.match(name)) and not _LIBRARY.search(name)


def where(name: str) -> str:
    """``"train.py(42): train_step"`` → ``"train_step (train.py:42)"``; other names as recorded."""
    m = _FRAME.match(name)
    if not m:
        return name
    path = m.group("path").replace("\\", "/")
    short = "/".join(path.split("/")[-2:]) if path.count("/") > 1 else path
    return f"{m.group('func')} ({short}:{m.group('line')})"


def python_idle(ev: pd.DataFrame, python: np.ndarray, idle: Intervals) -> dict[str, int]:
    """GPU-idle ns per charged frame name, for the ``python`` rows of ``ev`` (one rank; inside steps) against
    that rank's GPU-idle time ``idle``."""
    rows = np.flatnonzero(python)
    if not len(rows) or not len(idle):
        return {}
    sub = ev.iloc[rows]
    starts, ends = sub["start_ns"].to_numpy(), sub["end_ns"].to_numpy()
    inclusive = idle.covered_in(starts, ends)
    names = sub["name"].astype(str).to_numpy()
    thread = pd.factorize(sub["pid"].astype(str) + "/" + sub["tid"].astype(str))[0]
    order = np.lexsort((-ends, starts, thread))
    own = inclusive.astype(np.int64).copy()
    owner = np.arange(len(rows))
    user = np.array([is_user_frame(n) for n in names])
    stack: list[int] = []
    last_thread = -1
    for i in order:
        if thread[i] != last_thread:
            stack, last_thread = [], thread[i]
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        if stack:
            parent = stack[-1]
            own[parent] -= inclusive[i]
            if not user[i]:
                owner[i] = owner[parent]
        stack.append(i)
    out: dict[str, int] = {}
    for i in np.flatnonzero(own > 0):
        key = names[owner[i]]
        out[key] = out.get(key, 0) + int(own[i])
    return out


def table(charged: dict[str, int]) -> pd.DataFrame:
    if not charged:
        return empty()
    df = pd.DataFrame(
        {"name": list(charged), "idle_ns": np.array(list(charged.values()), dtype=np.int64)}
    )
    return df.sort_values("idle_ns", ascending=False, ignore_index=True)
