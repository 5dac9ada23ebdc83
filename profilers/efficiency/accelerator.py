"""The accelerator a trace ran on when ``deviceProperties`` does not name it.

Kineto records ``deviceProperties`` for CUDA and ROCm GPUs only. A trace of another accelerator
(Meta's MTIA, Intel Gaudi's HPU, an NPU...) has that list empty, while its device-side processes
carry the family's name (``process_name`` / ``process_labels`` metadata such as "MTIA 0"), and
``distributedInfo.backend`` may name it too. Such a device is named by its family, never called a
GPU, and no GPU's peak applies to it.
"""

from __future__ import annotations

import re
from typing import Iterable

# Families of accelerators that are not GPUs, as their processes and backends spell them.
NON_GPU_FAMILIES = ("MTIA", "HPU", "NPU", "TPU", "IPU", "GCU", "MLU")
_WORD = re.compile(r"[A-Za-z]+")
#: Appended to the name of such a device wherever it is shown.
PEAK_UNKNOWN = "peak unknown"


def accelerator_family(processes: Iterable[str], backend: str | None) -> str | None:
    """The non-GPU accelerator family the trace's process names or labels start with ("MTIA 0":
    "MTIA"), else the one its distributed backend's name holds; None when neither names one (a GPU
    or a CPU trace)."""
    for text in processes:
        m = _WORD.match(text.strip())
        if m is not None and m.group(0).upper() in NON_GPU_FAMILIES:
            return m.group(0).upper()
    words = _WORD.findall(backend or "")
    for family in NON_GPU_FAMILIES:
        if any(w.upper() == family for w in words):
            return family
    return None


def is_non_gpu(device_name: str) -> bool:
    """Whether ``device_name`` is a family :func:`accelerator_family` named (so not a GPU)."""
    return device_name in NON_GPU_FAMILIES


def shown_name(device_name: str) -> str:
    """``device_name`` as a line of text shows it: a non-GPU family with its peak unknown."""
    return f"{device_name} accelerator ({PEAK_UNKNOWN})" if is_non_gpu(device_name) else device_name
