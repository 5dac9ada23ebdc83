"""Host facts the agent needs, from the standard library alone (no psutil in the user's environment).

Linux's ``/proc`` is read where it exists; elsewhere each function falls back to what ``os`` offers, or says
it does not know (``None``) rather than guess.
"""

from __future__ import annotations

import os
import platform
import resource

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask, as a DataLoader worker would be scheduled)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory_bytes() -> int:
    """Memory available to start new work without swapping: ``MemAvailable`` (Linux), else free pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * _PAGE
    except (AttributeError, ValueError, OSError):
        return 0


def peak_rss_mb() -> float:
    """This process's peak resident memory (``ru_maxrss``: KiB on Linux, bytes on macOS), in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024**2 if platform.system() == "Darwin" else peak / 1024.0


class RssReader:
    """This process's resident memory, read once a step: ``/proc/self/statm`` kept open, so a read
    costs a microsecond or two instead of an open and a close (tens of microseconds, a share of a
    sub-millisecond step). Opened again in a forked child (its ``self`` is another process)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._pid = -1

    def mb(self) -> float | None:
        if self._pid != os.getpid():
            self.close()
            self._pid = os.getpid()
            try:
                self._fd = os.open("/proc/self/statm", os.O_RDONLY)
            except OSError:
                self._fd = None
        if self._fd is None:
            return current_rss_mb()
        try:
            return int(os.pread(self._fd, 64, 0).split()[1]) * _PAGE / 1024**2
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = None


def current_rss_mb() -> float | None:
    """This process's resident memory now (``/proc/self/statm``), in MiB; ``None`` where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE / 1024**2
    except (OSError, ValueError, IndexError):
        return None


#: CPU flags with a fast bf16 matmul path (x86: AVX512-BF16 or AMX); without them bf16 is emulated and slow.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux x86), or ``None`` where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def cpu_bf16_flags() -> str | None:
    """Which of :data:`BF16_FLAGS` this CPU has, in words ("avx512_bf16 amx_bf16", "none"), or ``None`` unknown."""
    flags = cpu_flags()
    if flags is None:
        return None
    have = [f for f in BF16_FLAGS if f in flags]
    return " ".join(have) if have else "none"


def cpu_model() -> str | None:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else the platform's processor string or ``None``."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
