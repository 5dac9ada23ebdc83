"""The GPU architecture a trace's kernel names reveal, for a trace that does not name its device.

cuBLAS, cuDNN and CUTLASS name their kernels for the architecture they were built for: ``volta_sgemm_128x64_nn``,
``volta_scudnn_128x64_relu_interior_nn_v1``, ``turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn``,
``ampere_bf16_s16816gemm_…``, ``sm80_xmma_gemm_…``, ``sm90_xmma_gemm_…``, ``cutlass_80_tensorop_…``. A kernel built
for one architecture runs on that architecture or a newer one, so the device is at least the newest architecture
named; that is what :func:`infer_arch` returns, with the kernel it read it from. It decides what advice fits
(bf16 and TF32 Tensor Cores exist from Ampere, sm_80, on: on Volta and Turing mixed precision is fp16 with a
GradScaler), never a peak: the variants of one architecture differ too much for an MFU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

#: Compute capability (major*10+minor) -> architecture name.
_NAMES = {
    70: "Volta",
    72: "Volta",
    75: "Turing",
    80: "Ampere",
    86: "Ampere",
    87: "Ampere",
    89: "Ada Lovelace",
    90: "Hopper",
    100: "Blackwell",
    120: "Blackwell",
}
#: Name prefixes the NVIDIA libraries use -> compute capability.
_WORDS = {"volta": 70, "turing": 75, "ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100}
_BY_WORD = re.compile(r"^(volta|turing|ampere|hopper|blackwell)_", re.IGNORECASE)
_BY_SM = re.compile(
    r"(?:^|[^a-z0-9])(?:sm|cutlass)_?(70|72|75|80|86|87|89|90|100|120)a?_", re.IGNORECASE
)


@dataclass(frozen=True)
class GpuArch:
    """An architecture read from a kernel name: ``name`` ("Volta"), ``sm`` (70), ``kernel`` (the evidence)."""

    name: str
    sm: int
    kernel: str

    @property
    def fast_bf16(self) -> bool:
        """bf16 Tensor Cores (and TF32) exist from sm_80 (Ampere) on."""
        return self.sm >= 80

    @property
    def label(self) -> str:
        """ "a Volta GPU (sm_70)"."""
        return f"a {self.name} GPU (sm_{self.sm})"

    @property
    def basis(self) -> str:
        """Where it was read: "inferred from kernel names such as volta_sgemm_128x64_nn"."""
        short = self.kernel if len(self.kernel) <= 60 else self.kernel[:57] + "..."
        return f"inferred from kernel names such as {short}; the trace does not name its device"


def arch_of(kernel: str) -> int | None:
    """The compute capability a kernel's name was built for, or ``None`` when its name does not say."""
    if m := _BY_WORD.match(kernel):
        return _WORDS[m.group(1).lower()]
    if m := _BY_SM.search(kernel):
        return int(m.group(1))
    return None


def infer_arch(kernels: Iterable[str]) -> GpuArch | None:
    """The newest architecture any of ``kernels`` names (the device is at least that), or ``None``."""
    best: tuple[int, str] | None = None
    for name in kernels:
        sm = arch_of(name)
        if sm is not None and (best is None or sm > best[0]):
            best = (sm, name)
    return GpuArch(_NAMES[best[0]], best[0], best[1]) if best else None
