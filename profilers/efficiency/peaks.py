"""Dense peak matmul throughput of common accelerators, by dtype, from the device name a trace records.

Figures are the vendors' datasheet numbers in TFLOP/s **without structured sparsity** (NVIDIA datasheets print
"with sparsity" figures, twice these, beside them). ``fp32`` is the plain (non-Tensor-Core) fp32 rate on NVIDIA
and the fp32 *matrix* rate on AMD Instinct; ``tf32`` the TF32 Tensor Core rate (from Ampere on); ``None`` means
the device has no fast path for that dtype (no bf16 Tensor Cores on a V100 or T4). Sources, one per row:
NVIDIA V100 datasheet (SXM2 / PCIe), T4 datasheet, A100 datasheet (2021), A10 datasheet, L4 datasheet, H100
datasheet (SXM / PCIe), H200 datasheet (SXM: the H100 SXM's compute), DGX/HGX B200 datasheet (per GPU),
GeForce RTX 3090 / 4090 whitepapers (Ampere GA102, Ada AD102: fp16/bf16 with fp32 accumulate), AMD Instinct
MI250 / MI250X / MI300X datasheets. An unknown name is said to be unknown, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class DevicePeak:
    """One device's dense peaks (TFLOP/s) by dtype key (``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``)."""

    name: str
    tflops: Mapping[str, float | None]
    source: str
    ampere_or_newer: bool  # TF32 and bf16 Tensor Cores exist (NVIDIA sm_80+, AMD CDNA2+)

    @property
    def has_fast_bf16(self) -> bool:
        return bool(self.tflops.get("bf16"))


def _p(
    name: str,
    fp32: float,
    tf32: float | None,
    bf16: float | None,
    fp16: float,
    fp8: float | None,
    source: str,
) -> DevicePeak:
    return DevicePeak(
        name,
        {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": fp16, "fp8": fp8},
        source,
        ampere_or_newer=tf32 is not None or bf16 is not None,
    )


#: (pattern on the device name, peaks); the first match wins, so specific variants come first.
PEAKS: tuple[tuple[re.Pattern[str], DevicePeak], ...] = (
    (
        re.compile(r"V100.*PCIE", re.I),
        _p("V100 PCIe", 14.0, None, None, 112.0, None, "NVIDIA V100 datasheet"),
    ),
    (
        re.compile(r"V100", re.I),
        _p("V100 SXM2", 15.7, None, None, 125.0, None, "NVIDIA V100 datasheet"),
    ),
    (re.compile(r"\bT4\b", re.I), _p("T4", 8.1, None, None, 65.0, None, "NVIDIA T4 datasheet")),
    (
        re.compile(r"A100", re.I),
        _p("A100", 19.5, 156.0, 312.0, 312.0, None, "NVIDIA A100 datasheet"),
    ),
    (
        re.compile(r"\bA10\b", re.I),
        _p("A10", 31.2, 62.5, 125.0, 125.0, None, "NVIDIA A10 datasheet"),
    ),
    (re.compile(r"\bL4\b", re.I), _p("L4", 30.3, 60.0, 121.0, 121.0, 242.0, "NVIDIA L4 datasheet")),
    (
        re.compile(r"H100.*PCIE", re.I),
        _p("H100 PCIe", 51.0, 378.0, 756.0, 756.0, 1513.0, "NVIDIA H100 datasheet"),
    ),
    (
        re.compile(r"H100", re.I),
        _p("H100 SXM", 67.0, 494.7, 989.4, 989.4, 1978.9, "NVIDIA H100 datasheet"),
    ),
    (
        re.compile(r"H200", re.I),
        _p("H200", 67.0, 494.7, 989.4, 989.4, 1978.9, "NVIDIA H200 datasheet"),
    ),
    (
        re.compile(r"B200", re.I),
        _p("B200", 80.0, 1100.0, 2250.0, 2250.0, 4500.0, "NVIDIA HGX B200 datasheet"),
    ),
    (
        re.compile(r"RTX\s*4090", re.I),
        _p("RTX 4090", 82.6, 82.6, 165.2, 165.2, 330.3, "NVIDIA Ada whitepaper"),
    ),
    (
        re.compile(r"RTX\s*3090", re.I),
        _p("RTX 3090", 35.6, 35.6, 71.0, 71.0, None, "NVIDIA Ampere GA102 whitepaper"),
    ),
    (
        re.compile(r"MI250X", re.I),
        _p("MI250X", 95.7, None, 383.0, 383.0, None, "AMD Instinct MI250X datasheet"),
    ),
    (
        re.compile(r"MI250", re.I),
        _p("MI250", 90.5, None, 362.1, 362.1, None, "AMD Instinct MI250 datasheet"),
    ),
    (
        re.compile(r"MI300X", re.I),
        _p("MI300X", 163.4, 653.7, 1307.4, 1307.4, 2614.9, "AMD Instinct MI300X datasheet"),
    ),
)

#: The models the table knows, as a picker lists them (each name finds its own row: :func:`device_peak`).
PEAK_NAMES: tuple[str, ...] = tuple(peak.name for _, peak in PEAKS)

#: Trace ``Input type`` names → dtype keys of :class:`DevicePeak`.
DTYPES: Mapping[str, str] = {
    "float": "fp32",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
}


def device_peak(name: str | None) -> DevicePeak | None:
    """The peaks of the device called ``name`` (as ``deviceProperties`` records it), or ``None`` when unknown."""
    if not name:
        return None
    return next((peak for pattern, peak in PEAKS if pattern.search(name)), None)


def dtype_key(trace_dtype: str) -> str | None:
    """``"c10::BFloat16"`` → ``"bf16"``; ``None`` for a type with no entry (double, integers, not recorded)."""
    return DTYPES.get(trace_dtype)
