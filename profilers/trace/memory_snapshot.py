"""Read a ``torch.cuda.memory._dump_snapshot`` pickle safely and summarise what it says about memory.

A snapshot is a pickle, and unpickling runs code chosen by whoever wrote the file. This reader uses an
unpickler that refuses *every* class and global: real snapshots hold only dicts, lists, tuples, strings and
numbers, so nothing legitimate is lost, and a malicious file fails with a clear message instead of running.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profilers.errors import TraceError

MAX_SNAPSHOT_BYTES = 512 * 1024**2
GIB = 1024**3  # snapshots are reported in GiB everywhere (CLI, rules, dashboard, reports)
PICKLE_MAGIC = b"\x80"
SNAPSHOT_SUFFIXES = (
    ".pickle",
    ".pkl",
    ".pt",
)  # what torch.cuda.memory._dump_snapshot files are called (or no suffix)


class _NoClassesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"refused to load {module}.{name}: snapshots never need classes"
        )


@dataclass(frozen=True)
class AllocationSite:
    """Where the largest live-at-peak allocations came from (first frame outside torch internals)."""

    where: str
    bytes: int
    count: int


@dataclass(frozen=True)
class MemorySnapshot:
    """Allocator state and history of one device. Bytes throughout."""

    source: str
    segments: int
    reserved_bytes: int
    allocated_bytes: int  # at the moment of the dump
    peak_allocated_bytes: int | None  # replayed from the allocation history, when recorded
    history_events: int
    oom_events: int
    expandable_segments: bool | None
    top_sites: tuple[AllocationSite, ...]

    @property
    def peak_share_of_reserved(self) -> float | None:
        if not self.peak_allocated_bytes or not self.reserved_bytes:
            return None
        return self.peak_allocated_bytes / self.reserved_bytes


def is_snapshot_file(path: str | os.PathLike[str]) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as fh:
        return fh.read(1) == PICKLE_MAGIC and p.suffix.lower() in (*SNAPSHOT_SUFFIXES, "")


def load_memory_snapshot(path: str | os.PathLike[str]) -> MemorySnapshot:
    p = Path(path)
    return _summarise(read_snapshot_document(p), p.name)


def read_snapshot_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot's plain document (dicts, lists, numbers, strings), read by the class-refusing unpickler.
    Raises TraceError for a file too large, not a pickle, a pickle that needs a class, or not a snapshot."""
    p = Path(path)
    size = p.stat().st_size
    if size > MAX_SNAPSHOT_BYTES:
        raise TraceError(
            f"{p.name}: {size // 1024**2} MiB; memory snapshots over "
            f"{MAX_SNAPSHOT_BYTES // 1024**2} MiB are not read"
        )
    try:
        doc = _NoClassesUnpickler(io.BytesIO(p.read_bytes())).load()
    except pickle.UnpicklingError as err:
        raise TraceError(f"{p.name}: not a plain memory snapshot ({err})") from None
    except (
        EOFError,
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        RecursionError,
        MemoryError,
    ) as err:
        raise TraceError(f"{p.name}: not a readable pickle ({type(err).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("segments"), list):
        raise TraceError(
            f"{p.name}: a pickle, but not a torch.cuda.memory snapshot (no 'segments')"
        )
    return doc


def _num(d: Any, key: str) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _summarise(doc: dict[str, Any], source: str) -> MemorySnapshot:
    segments = [s for s in doc["segments"] if isinstance(s, dict)]
    traces = raw if isinstance(raw := doc.get("device_traces"), list) else []
    history = [t for dev in traces if isinstance(dev, list) for t in dev if isinstance(t, dict)]
    allocated_now = sum(_num(s, "allocated_size") for s in segments)
    above_end, live_at_peak = _replay(history)
    settings = raw if isinstance(raw := doc.get("allocator_settings"), dict) else {}
    expandable = settings.get("expandable_segments")
    return MemorySnapshot(
        source=source,
        segments=len(segments),
        reserved_bytes=sum(_num(s, "total_size") for s in segments),
        allocated_bytes=allocated_now,
        peak_allocated_bytes=allocated_now + above_end if history else None,
        history_events=len(history),
        oom_events=sum(1 for t in history if t.get("action") == "oom"),
        expandable_segments=expandable if isinstance(expandable, bool) else None,
        top_sites=_sites(live_at_peak),
    )


def _replay(history: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """Walk alloc/free events in order: the peak of (allocated so far) relative to the start of the history,
    and the allocations (made within the history) alive at that moment."""
    live: dict[int, dict[str, Any]] = {}
    current = peak = 0
    at_peak: list[dict[str, Any]] = []
    for t in history:
        action, addr, size = t.get("action"), _num(t, "addr"), _num(t, "size")
        if action == "alloc":
            live[addr] = t
            current += size
            if current > peak:
                peak, at_peak = current, list(live.values())
        elif action == "free_completed":
            current -= size  # also frees of blocks allocated before recording began
            live.pop(addr, None)
    return peak - current, at_peak  # peak above the level at the end of the history


def site_of(frames: Any) -> str:
    """The allocation site of a stack: its first frame outside torch and site-packages, ``file:line function``
    (the one key every page groups a snapshot's allocations by). A stack recorded with C++ frames too (torch
    2.1+'s default ``stacks="all"``) starts in the allocator (``??:0 torch::unwind::unwind()``): the Python
    frames are read first, and C++ frames only when the stack has no Python frame at all."""
    stack = [f for f in (frames if isinstance(frames, list) else []) if isinstance(f, dict)]
    python = [f for f in stack if str(f.get("filename", "")).endswith(".py")]
    if not python and stack:
        return _cpp_site(stack)
    for f in python or stack:
        filename = str(f.get("filename", ""))
        if "site-packages" in filename or "torch" in filename.replace("\\", "/").split("/")[-2:-1]:
            continue
        return f"{filename.replace(chr(92), '/').split('/')[-1]}:{f.get('line', '?')} {f.get('name', '')}".strip()
    return "unknown"


_BACKWARD_NODE = re.compile(r"torch::autograd::generated::(\w+)::apply")
_PLUMBING = (
    "torch::unwind::",
    "torch::CapturedTraceback::",
    "torch::cuda::",
    "c10::cuda::CUDACachingAllocator",
    "at::detail::empty",
    "at::empty",
    "c10::impl::",
    "at::_ops::",
    "at::TensorIterator",
)


def _cpp_site(stack: list[dict[str, Any]]) -> str:
    """A stack with C++ frames only: autograd's backward thread ("backward: MeanBackward0"), else the first
    frame past the allocator and dispatcher plumbing, by function name ("C++: at::native::div")."""
    for f in stack:
        if m := _BACKWARD_NODE.search(str(f.get("name", ""))):
            return f"backward: {m.group(1)}"
    for f in stack:
        name = str(f.get("name", ""))
        if name and not name.startswith(_PLUMBING) and "(anonymous namespace)" not in name:
            return f"C++: {name.split('(')[0].split('<')[0].removeprefix('void ')}"
    return "unknown"


def _sites(allocs: list[dict[str, Any]], top: int = 5) -> tuple[AllocationSite, ...]:
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for a in allocs:
        where = site_of(a.get("frames"))
        sizes[where] += _num(a, "size")
        counts[where] += 1
    return tuple(AllocationSite(w, b, counts[w]) for w, b in sizes.most_common(top))


def gib_device(n: int) -> str:
    """ "an 80 GiB device", "a 16 GiB device" (the article follows the number's sound)."""
    size = f"{n / GIB:.0f}" if abs(n / GIB - round(n / GIB)) < 0.05 else f"{n / GIB:.1f}"
    whole = size.split(".")[0]
    article = "an" if whole.startswith("8") or whole in ("11", "18") else "a"
    return f"{article} {size} GiB device"


def snapshot_json(s: MemorySnapshot, device_memory_bytes: int | None = None) -> dict[str, Any]:
    """The snapshot as the command line and reports print it (GiB, shares of the reservation/device)."""
    gib = GIB
    peak = s.peak_allocated_bytes
    return {
        "source": s.source,
        "segments": s.segments,
        "reserved_gib": round(s.reserved_bytes / gib, 4),
        "allocated_at_dump_gib": round(s.allocated_bytes / gib, 4),
        "peak_allocated_gib": None if peak is None else round(peak / gib, 4),
        "peak_share_of_reserved": None
        if s.peak_share_of_reserved is None
        else round(s.peak_share_of_reserved, 4),
        "device_total_gib": None
        if not device_memory_bytes
        else round(device_memory_bytes / gib, 4),
        "reserved_share_of_device": (
            round(s.reserved_bytes / device_memory_bytes, 4) if device_memory_bytes else None
        ),
        "history_events": s.history_events,
        "oom_events": s.oom_events,
        "expandable_segments": s.expandable_segments,
        "top_sites": [
            {"where": t.where, "gib": round(t.bytes / gib, 4), "count": t.count}
            for t in s.top_sites
        ],
    }
