"""Shared constants of the trace_parse benchmark: repository paths, byte units and the size format of its output."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GB = 10**9
MiB = 1024**2


def fmt_size(n: int | None) -> str:
    """``n`` bytes as the tables print them: GB (10^9) from 1 GB, whole MiB from 10 MiB, else MiB with a decimal."""
    if n is None:
        return "-"
    return (
        f"{n / GB:.2f} GB"
        if n >= GB
        else f"{n / MiB:.0f} MiB"
        if n >= 10 * MiB
        else f"{n / MiB:.1f} MiB"
    )
