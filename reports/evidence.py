"""Evidence as a person reads it: ``gpu_busy_share 0.5602`` becomes ``GPU busy — 56.0%``.

A rule's evidence is a mapping of stable keys (part of the JSON contract, so they stay as they are) to numbers,
strings or ``None``. :func:`format_evidence` is the one place that turns it into labelled, unit-formatted rows:
the unit is read from the key's suffix (``_share`` → %, ``_ms`` → ms, ``_mb`` → MiB, ``_gib`` → GiB …), the label
from the rest of the key with the usual acronyms spelled as such; ``None`` reads "not recorded". The Advisor page
and the HTML and Markdown reports all use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from profilers.efficiency.mfu import mfu_percent

NOT_RECORDED = "not recorded"
#: Words written in capitals or with their usual spelling in a label.
WORDS = {
    "gpu": "GPU",
    "cpu": "CPU",
    "comm": "communication",
    "ms": "ms",
    "mb": "MiB",
    "gib": "GiB",
    "fp32": "FP32",
    "cudnn": "cuDNN",
    "gemm": "GEMM",
    "io": "I/O",
    "oom": "OOM",
    "ddp": "DDP",
    "mfu": "MFU (model FLOPs utilisation)",
}
#: Key suffix → how the value is written. Checked longest first, so ``_per_step`` wins over ``_step``.
_UNITS: tuple[tuple[str, str], ...] = (
    ("_share_of_kernel_time", "pct"),
    ("_share_of_step", "pct"),
    ("_share_of_capacity", "pct"),
    ("_share", "pct"),
    ("_fraction", "pct"),
    ("_fraction_of_loader_time", "pct"),
    ("_busy", "pct"),
    ("_ms", "ms"),
    ("_mb", "mib"),
    ("_gib", "gib"),
    ("_bytes", "bytes"),
    ("_per_step", "per_step"),
    ("_per_s", "per_s"),
    ("mfu", "pct"),
    ("_rank", "int"),
    ("_step", "int"),
    ("_steps", "int"),
    ("_logged", "int"),
)


def _unit(key: str) -> str:
    for suffix, unit in sorted(_UNITS, key=lambda s: -len(s[0])):
        if key.endswith(suffix):
            return unit
    return "plain"


def evidence_label(key: str) -> str:
    """``dataloader_exposed_share`` → "Dataloader exposed (share of step time)"; units are left to the value."""
    unit = _unit(key)
    words = key.split("_")
    drop = {"ms", "mb", "gib", "bytes"} if unit in ("ms", "mib", "gib", "bytes") else set()
    if unit == "pct" and words[-1] == "share":
        words = words[:-1]
    kept = [WORDS.get(w, w) for w in words if w not in drop] or [key]
    text = " ".join(kept)
    return (
        text if kept[0] != kept[0].lower() else text[:1].upper() + text[1:]
    )  # "cuDNN" keeps its spelling


def _number(v: float, digits: int = 2) -> str:
    if v != 0 and abs(v) < 10**-digits:
        return f"{v:.{digits}g}"
    return f"{v:,.{digits}f}"


def evidence_value(key: str, value: object) -> str:
    """One value written with its unit: 56.0%, 12.34 ms, 1,024 MiB, 3.20 GiB; ``None`` → "not recorded"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_RECORDED
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    v = float(value)
    unit = _unit(key)
    # the words of the efficiency sentence beside it: one MFU per run, never two roundings
    if key == "mfu":
        return f"{mfu_percent(v)}%"
    if unit == "pct":
        return f"{100 * v:.1f}%"
    if unit == "ms":
        return f"{_number(v)} ms"
    if unit == "mib":
        return f"{v:,.0f} MiB" if abs(v) >= 100 else f"{_number(v, 1)} MiB"
    if unit == "gib":
        return f"{v:,.2f} GiB"
    if unit == "bytes":
        return f"{v / 1024**2:,.1f} MiB"
    if unit == "per_step":
        return f"{_number(v, 1)} per step"
    if unit == "per_s":
        return f"{_number(v, 1)} per s"
    if unit == "int" or (isinstance(value, int) and not isinstance(value, bool)):
        return f"{int(v):,}"
    return _number(v, 3)


def format_evidence(evidence: Mapping[str, object]) -> list[tuple[str, str]]:
    """Evidence as ``(label, formatted value)`` rows, in the rule's order."""
    return [(evidence_label(k), evidence_value(k, v)) for k, v in evidence.items()]
