"""Kineto's text, piece by piece: the kernel and operator tables and the event templates of the synthetic trace.

Every event template reproduces the layout PyTorch's profiler writes (one event over a few lines, fields in its
order); :mod:`trace_parse_kineto_writer` fills them in. Names and launch parameters are as CUDA 12 / PyTorch 2.x
write them for a bf16 transformer on H100s.
"""

from __future__ import annotations

# Kernels: (name, base duration µs, registers, shared mem, grid, block). Names as CUDA 12 / PyTorch 2.x write them.
KERNELS: dict[str, tuple[str, float, int, int, tuple[int, int, int], tuple[int, int, int]]] = {
    "gemm": (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
        "_kernel__5x_cublas",
        310.0,
        168,
        213504,
        (132, 1, 1),
        (384, 1, 1),
    ),
    "gemm_nt": (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k"
        "_off_kernel__5x_cublas",
        290.0,
        168,
        232448,
        (132, 1, 1),
        (384, 1, 1),
    ),
    "gemm_nn": (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8::Params)",
        330.0,
        230,
        98304,
        (16, 48, 1),
        (256, 1, 1),
    ),
    "flash_fwd": (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
        "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
        420.0,
        255,
        49152,
        (16, 64, 1),
        (128, 1, 1),
    ),
    "flash_bwd": (
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, "
        "64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
        "cutlass::bfloat16_t> >, true, false, false, false, false, true, false>(pytorch_flash::"
        "Flash_bwd_params)",
        980.0,
        255,
        73728,
        (32, 64, 1),
        (256, 1, 1),
    ),
    "layer_norm": (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
        "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
        "float*, c10::BFloat16*)",
        38.0,
        32,
        0,
        (8192, 1, 1),
        (128, 1, 1),
    ),
    "layer_norm_bwd": (
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::"
        "BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, "
        "c10::BFloat16 const*, c10::BFloat16*, int)",
        52.0,
        40,
        0,
        (8192, 1, 1),
        (128, 1, 1),
    ),
    "gelu": (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
        "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
        "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::"
        "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
        "const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
        61.0,
        28,
        0,
        (65536, 1, 1),
        (128, 1, 1),
    ),
    "gelu_bwd": (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::"
        "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
        "operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, "
        "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
        "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
        "c10::BFloat16)#1}, std::array<char*, 3ul>)",
        88.0,
        30,
        0,
        (65536, 1, 1),
        (128, 1, 1),
    ),
    "add": (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
        29.0,
        22,
        0,
        (32768, 1, 1),
        (128, 1, 1),
    ),
    "softmax": (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, "
        "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, "
        "c10::BFloat16 const*, int)",
        140.0,
        38,
        0,
        (8192, 1, 1),
        (1024, 1, 1),
    ),
    "nll": (
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, "
        "long>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, bool, "
        "long, long, long, long)",
        12.0,
        30,
        0,
        (1, 1, 1),
        (32, 1, 1),
    ),
    "adam": (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)"
        "::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<"
        "float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, "
        "float const*, float const*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>"
        ", at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false"
        ">, float*, double, double, double, double, double, bool, float const*, float const*)",
        210.0,
        96,
        0,
        (320, 1, 1),
        (512, 1, 1),
    ),
    "nccl": (
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        2600.0,
        96,
        0,
        (8, 1, 1),
        (640, 1, 1),
    ),
}

# Host operators: name -> (base µs, record_shapes args as Kineto writes them, without the ids).
SHAPES = {
    "linear": (
        '"Concrete Inputs": ["", "", ""], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"], '
        '"Input Strides": [[4194304, 4096, 1], [1, 4096], [1]], '
        '"Input Dims": [[8, 512, 4096], [4096, 4096], [4096]]'
    ),
    "mat2": (
        '"Concrete Inputs": ["", ""], "Input type": ["c10::BFloat16", "c10::BFloat16"], '
        '"Input Strides": [[4096, 1], [1, 4096]], "Input Dims": [[4096, 4096], [4096, 4096]]'
    ),
    "unary": (
        '"Concrete Inputs": [""], "Input type": ["c10::BFloat16"], '
        '"Input Strides": [[4194304, 4096, 1]], "Input Dims": [[8, 512, 4096]]'
    ),
    "binary": (
        '"Concrete Inputs": ["", "", "1"], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"], '
        '"Input Strides": [[4194304, 4096, 1], [4194304, 4096, 1], []], '
        '"Input Dims": [[8, 512, 4096], [8, 512, 4096], []]'
    ),
    "ln": (
        '"Concrete Inputs": ["", "[4096]", "", "", "1e-05", "True"], "Input type": ["c10::BFloat16", '
        '"ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"], "Input Strides": [[4194304, 4096, '
        '1], [], [1], [1], [], []], "Input Dims": [[8, 512, 4096], [], [4096], [4096], [], []]'
    ),
    "attn": (
        '"Concrete Inputs": ["", "", "", "", "0.", "True", "", ""], "Input type": ["c10::BFloat16", '
        '"c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar", "", ""], "Input Strides": [[4194304, 128, '
        '4096, 1], [4194304, 128, 4096, 1], [4194304, 128, 4096, 1], [], [], [], [], []], "Input Dims": [[8, '
        "32, 512, 128], [8, 32, 512, 128], [8, 32, 512, 128], [], [], [], [], []]"
    ),
    "to": (
        '"Concrete Inputs": ["", "", "", "", "", "True", "False", ""], "Input type": ["long int", "", "", "", '
        '"", "Scalar", "Scalar", ""], "Input Strides": [[512, 1], [], [], [], [], [], [], []], '
        '"Input Dims": [[8, 512], [], [], [], [], [], [], []]'
    ),
    "none": None,
}

HOST_PID = 2405173
GPU_PID = 0
MAIN_TID = 2405173
BWD_TID = 2405612
COMPUTE_STREAM = 7
LAYER_ACTIVATIONS = 4 * 33_554_432 - 16_777_216  # net bytes a forward layer leaves allocated
NCCL_STREAM = 20

T_CPU = (
    '  {\n    "ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
    '    "args": {\n      "External id": %d,"Record function id": 0, %s"Ev Idx": %d\n    }\n  },\n'
)
T_ANN = (
    '  {\n    "ph": "X", "cat": "user_annotation", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, '
    '"dur": %.3f,\n    "args": {\n      "External id": %d,"Record function id": 0, "Ev Idx": %d\n    }\n  },\n'
)
T_RT = (
    '  {\n    "ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,'
    '\n    "args": {\n      "External id": %d, "cbid": %d, "correlation": %d\n    }\n  },\n'
)
T_FLOW_S = (
    '  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g"\n'
    "  },\n"
)
T_FLOW_F = (
    '  {\n    "ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g", '
    '"bp": "e"\n  },\n'
)
T_KERNEL = (
    '  {\n    "ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
    '    "args": {\n      "External id": %d,\n      "queued": 0, "device": %d, "context": 1,\n'
    '      "stream": %d, "correlation": %d,\n%s    }\n  },\n'
)
T_COPY = (
    '  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
    '    "args": {\n      "External id": %d,\n      "device": %d, "context": 1,\n      "stream": %d, '
    '"correlation": %d,\n      "bytes": %d, "memory bandwidth (GB/s)": %.4f\n    }\n  },\n'
)
T_GPU_ANN = (
    '  {\n    "ph": "X", "cat": "gpu_user_annotation", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, '
    '"dur": %.3f,\n    "args": {\n      "External id": %d\n    }\n  },\n'
)
T_MEM = (
    '  {\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n    "pid": %d, "tid": %d,\n'
    '    "ts": %.3f,\n    "args": {\n      "Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, '
    '"Addr": %d, "Device Id": 0, "Device Type": 1, "Ev Idx": %d\n    }\n  },\n'
)


def kernel_static(
    regs: int, smem: int, grid: tuple[int, int, int], block: tuple[int, int, int]
) -> str:
    """A kernel's launch fields (registers, shared memory, grid, occupancy...), the same text for every launch."""
    blocks = grid[0] * grid[1] * grid[2]
    warps = block[0] * block[1] * block[2] // 32
    return (
        '      "registers per thread": %d,\n      "shared memory": %d,\n      "blocks per SM": %s,\n'
        '      "warps per SM": %s,\n      "grid": [%d, %d, %d],\n      "block": [%d, %d, %d],\n'
        '      "est. achieved occupancy %%": %d\n'
    ) % (
        regs,
        smem,
        repr(round(blocks / 132, 6)),
        repr(round(blocks * warps / 132, 6)),
        *grid,
        *block,
        min(100, max(1, int(100 * warps * min(blocks, 132) / (132 * 64)))),
    )
