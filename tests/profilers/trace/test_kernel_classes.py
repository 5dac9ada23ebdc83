"""Kernel-name classes: GEMM detection and the low-precision markers, NVIDIA and AMD spellings alike."""

from __future__ import annotations

import pytest

from profilers.trace.kernel_classes import LOW_PRECISION_KERNEL, classify_kernel, collective_kind

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


@pytest.mark.parametrize(
    "name, kclass",
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
        # expert parallelism (DeepEP, as DeepSeek's profile-data spells it and as the library does),
        # NVSHMEM, ROCm's and Ascend's/Gaudi's collective libraries
        (
            "void dpsk::ep::internode::dispatch<false, 8, 4, 2>(int4*, float*, int*)",
            "communication",
        ),
        ("void dpsk::ep::internode::combine<__nv_bfloat16, 8, 4>(int4*, float*)", "communication"),
        ("void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, int*)", "communication"),
        ("void dpsk::ep::internode::cached_notify<8>(int, int, int)", "communication"),
        ("void deep_ep::intranode::dispatch<8, 768, 6144>(int4*, float*)", "communication"),
        ("void deep_ep::internode_ll::combine<8, 3, 7168>(void*, void*)", "communication"),
        ("nvshmemi_proxy_progress_kernel", "communication"),
        (
            "void nvshmemi_transfer_rma_nbi<(threadgroup_t)3, (nvshmemi_op_t)0>(void*)",
            "communication",
        ),
        ("rcclGenericKernel<1, false>", "communication"),
        ("hcclAllReduce_f32", "communication"),
        ("all_to_all_single_kernel", "communication"),
        ("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>", "elementwise"),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "normalization"),
    ],
)
def test_other_classes(name: str, kclass: str) -> None:
    assert classify_kernel(name) == kclass


@pytest.mark.parametrize(
    "name",
    [
        "void dpsk::ep::internode::dispatch<false, 8>(int4*)",
        "void deep_ep::intranode::combine<8>(int4*)",
    ],
)
def test_expert_parallel_kernels_are_all_to_all(name: str) -> None:
    assert collective_kind(name) == "all_to_all"


@pytest.mark.parametrize(
    "name",
    [
        "void at::native::index_select_kernel<float>",
        "ampere_sgemm_128x64_tn",
        "void at::native::deep_copy_kernel",
        "step_kernel",
        "sweep_kernel",
    ],
)
def test_names_that_only_look_alike_are_not_communication(name: str) -> None:
    assert classify_kernel(name) != "communication"


def test_the_lowered_twin_of_a_pattern_answers_as_the_pattern_does() -> None:
    """``matcher`` searches a lowered ASCII name with a case-sensitive twin of a lower-case IGNORECASE pattern:
    for every pattern here and names of any case, ASCII or not, its answer is ``pattern.search``'s."""
    import re

    from profilers.trace import kernel_classes as kc

    patterns = [v for v in vars(kc).values() if isinstance(v, re.Pattern)]
    names = [
        *GEMMS,
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        "NCCLDEVKERNEL",
        "void at::native::vectorized_elementwise",
        "LayerNorm_FWD",
        "Flash_Attn_FWD",
        "ProfilerStep#3",
        "Optimizer.step#AdamW.step",
        "DataLoader.__next__",
        "aten::mm",
        "aten::MM",
        "c10d::allreduce_",
        "Torch-Compiled Region",
        "cudaLaunchKernel",
        "",
        "gemm_\u212a",  # KELVIN SIGN: IGNORECASE matches it as "k"; lowering it does too
        "\u017fgemm",  # LATIN SMALL LETTER LONG S: IGNORECASE matches it as "s"; the lowered twin is not used
        "Élan_Softmax",
        "triton_poi_fused_add_0",
        "sm90_xmma_gemm_bf16bf16_bf16f32",
    ]
    assert any(
        p.flags & re.IGNORECASE and p.pattern == p.pattern.lower() for p in patterns
    )  # twins exist
    for p in patterns:
        match = kc.matcher(p)
        assert [match(n) for n in names] == [p.search(n) is not None for n in names], p.pattern
