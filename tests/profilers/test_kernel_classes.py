"""Kernel-name classes: GEMM detection and the low-precision markers, NVIDIA and AMD spellings alike."""

from __future__ import annotations

import pytest

from profilers.trace.kernel_classes import LOW_PRECISION_KERNEL, classify_kernel

GEMMS = {
    # NVIDIA
    "volta_sgemm_128x64_nn": False,
    "ampere_sgemm_128x64_tn": False,
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn": True,
    "volta_h884gemm_64x64_ldg8_nn": True,
    "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32": True,
    "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4": True,
    # AMD Tensile / hipBLASLt (the type token after the layouts is case-sensitive)
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0": False,  # fp32 (S) with beta (B)
    "Cijk_Ailk_Bljk_DB_MT64x64x16": False,  # fp64
    "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI16x16x16x1_SN_1LDSB0": True,  # half in/out, fp32 compute
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64": True,  # bf16
    "Cijk_Ailk_Bljk_HB_MT64x64x16_SN": True,  # Tensile half with beta
    "Cijk_Ailk_Bljk_F8B8S_BH_MT128x128x64": True,  # fp8
}


@pytest.mark.parametrize("name", sorted(GEMMS))
def test_gemm_kernels_are_matmul_and_precision_is_read_from_the_name(name: str) -> None:
    assert classify_kernel(name) == "matmul"
    assert bool(LOW_PRECISION_KERNEL.search(name)) is GEMMS[name]


@pytest.mark.parametrize("name, kclass", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
    ("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>", "elementwise"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "normalization"),
])
def test_other_classes(name: str, kclass: str) -> None:
    assert classify_kernel(name) == kclass
