"""Trace-engine benchmark: Stepwise vs Holistic Trace Analysis vs a bare ``orjson.loads``.

Usage (from the repo root)::

    .venv/bin/python benchmarks/trace_parse.py [--synthetic-gb 1.0] [--skip-hta] [--repeats 3] [--json OUT]

Two inputs, measured in the same run and printed side by side:

(a) the largest shared real trace, ``<repo>/../shared/traces/communication/hta_v100_2rank_216k_events.json.gz``;
(b) a synthetic Kineto trace of ``--synthetic-gb`` GB (10^9 bytes, uncompressed ``.json``) that this script
    generates itself, deterministically, streaming to a temporary folder (see :func:`generate_kineto_trace`).

Contenders, each measured in a fresh subprocess so that peak memories never mix:

* Stepwise: ``profilers.trace_load.load_trace(path)`` + ``profilers.breakdown.breakdown(trace)``;
* ``orjson.loads`` of the same (decompressed) bytes, already in memory: the floor any Python JSON reader has;
* HTA (``holistictraceanalysis``): ``TraceAnalysis(trace_dir=...)`` + ``get_temporal_breakdown()``, run by the
  python of a separate venv (``.venv-bench``, made by ``benchmarks/_hta_env.sh``), time-boxed and RSS-capped.

Time is the wall time of the work itself inside the child (imports and interpreter start excluded, listed
separately). Peak memory is the child's peak RSS: ``ru_maxrss`` from ``wait4`` on that child, or the peak of
its whole process tree's RSS polled every 20 ms, whichever is larger (it includes the interpreter and
imports). Targets (issue 2): HTA/Stepwise time >= 5x, Stepwise/orjson time <= 3x, Stepwise peak RSS < 4x the
uncompressed size of the 1 GB trace.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

REPO = Path(__file__).resolve().parents[1]
SHARED_TRACE = REPO.parent / "shared" / "traces" / "communication" / "hta_v100_2rank_216k_events.json.gz"
HTA_VENV = REPO / ".venv-bench"
HTA_ENV_SCRIPT = REPO / "benchmarks" / "_hta_env.sh"
GB = 10**9
MiB = 1024**2

TARGET_HTA_SPEEDUP = 5.0
TARGET_ORJSON_RATIO = 3.0
TARGET_PEAK_RATIO = 4.0
PEAK_TARGET_MIN_BYTES = GB // 2  # the peak-memory target is stated for the 1 GB trace; small files are all imports
MIN_AVAILABLE = GB  # a child is stopped when the machine's available memory falls below this (others work here)


# ----------------------------------------------------------------------------------------------------------
# Synthetic Kineto trace generator
# ----------------------------------------------------------------------------------------------------------

@dataclass
class GenInfo:
    """What :func:`generate_kineto_trace` wrote: exact counts a reader must reproduce."""

    path: str
    bytes: int
    steps: int  # ProfilerStep#N spans on the host (each also mirrored once as a gpu_user_annotation)
    complete_events: int  # every "ph": "X" event, of any category
    cpu_ops: int
    user_annotations: int
    runtime: int
    kernels: int
    nccl_kernels: int
    memcpy: int
    memset: int
    gpu_annotations: int
    memory_events: int  # "[memory]" instants
    flow_events: int  # ac2g "s"/"f" pairs count as two
    metadata_events: int
    seconds: float = 0.0


# Kernels: (name, base duration µs, registers, shared mem, grid, block). Names as CUDA 12 / PyTorch 2.x write them.
_KERNELS: dict[str, tuple[str, float, int, int, tuple[int, int, int], tuple[int, int, int]]] = {
    "gemm": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
             "_kernel__5x_cublas", 310.0, 168, 213504, (132, 1, 1), (384, 1, 1)),
    "gemm_nt": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k"
                "_off_kernel__5x_cublas", 290.0, 168, 232448, (132, 1, 1), (384, 1, 1)),
    "gemm_nn": ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>"
                "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8::Params)",
                330.0, 230, 98304, (16, 48, 1), (256, 1, 1)),
    "flash_fwd": ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
                  "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
                  "false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
                  420.0, 255, 49152, (16, 64, 1), (128, 1, 1)),
    "flash_bwd": ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, "
                  "64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
                  "cutlass::bfloat16_t> >, true, false, false, false, false, true, false>(pytorch_flash::"
                  "Flash_bwd_params)", 980.0, 255, 73728, (32, 64, 1), (256, 1, 1)),
    "layer_norm": ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
                   "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
                   "float*, c10::BFloat16*)", 38.0, 32, 0, (8192, 1, 1), (128, 1, 1)),
    "layer_norm_bwd": ("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::"
                       "BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, "
                       "c10::BFloat16 const*, c10::BFloat16*, int)", 52.0, 40, 0, (8192, 1, 1), (128, 1, 1)),
    "gelu": ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
             "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
             "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::"
             "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
             "const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
             61.0, 28, 0, (65536, 1, 1), (128, 1, 1)),
    "gelu_bwd": ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::"
                 "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
                 "operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, "
                 "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
                 "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
                 "c10::BFloat16)#1}, std::array<char*, 3ul>)", 88.0, 30, 0, (65536, 1, 1), (128, 1, 1)),
    "add": ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
            29.0, 22, 0, (32768, 1, 1), (128, 1, 1)),
    "softmax": ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, "
                "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(c10::BFloat16*, "
                "c10::BFloat16 const*, int)", 140.0, 38, 0, (8192, 1, 1), (1024, 1, 1)),
    "nll": ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<c10::BFloat16, float, "
            "long>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, long const*, c10::BFloat16 const*, bool, "
            "long, long, long, long)", 12.0, 30, 0, (1, 1, 1), (32, 1, 1)),
    "adam": ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)"
             "::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<"
             "float, 4, (at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, "
             "float const*, float const*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>"
             ", at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false"
             ">, float*, double, double, double, double, double, bool, float const*, float const*)",
             210.0, 96, 0, (320, 1, 1), (512, 1, 1)),
    "nccl": ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             2600.0, 96, 0, (8, 1, 1), (640, 1, 1)),
}

# Host operators: name -> (base µs, record_shapes args as Kineto writes them, without the ids).
_SHAPES = {
    "linear": ('"Concrete Inputs": ["", "", ""], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"], '
               '"Input Strides": [[4194304, 4096, 1], [1, 4096], [1]], '
               '"Input Dims": [[8, 512, 4096], [4096, 4096], [4096]]'),
    "mat2": ('"Concrete Inputs": ["", ""], "Input type": ["c10::BFloat16", "c10::BFloat16"], '
             '"Input Strides": [[4096, 1], [1, 4096]], "Input Dims": [[4096, 4096], [4096, 4096]]'),
    "unary": ('"Concrete Inputs": [""], "Input type": ["c10::BFloat16"], '
              '"Input Strides": [[4194304, 4096, 1]], "Input Dims": [[8, 512, 4096]]'),
    "binary": ('"Concrete Inputs": ["", "", "1"], "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"], '
               '"Input Strides": [[4194304, 4096, 1], [4194304, 4096, 1], []], '
               '"Input Dims": [[8, 512, 4096], [8, 512, 4096], []]'),
    "ln": ('"Concrete Inputs": ["", "[4096]", "", "", "1e-05", "True"], "Input type": ["c10::BFloat16", '
           '"ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"], "Input Strides": [[4194304, 4096, '
           '1], [], [1], [1], [], []], "Input Dims": [[8, 512, 4096], [], [4096], [4096], [], []]'),
    "attn": ('"Concrete Inputs": ["", "", "", "", "0.", "True", "", ""], "Input type": ["c10::BFloat16", '
             '"c10::BFloat16", "c10::BFloat16", "", "Scalar", "Scalar", "", ""], "Input Strides": [[4194304, 128, '
             '4096, 1], [4194304, 128, 4096, 1], [4194304, 128, 4096, 1], [], [], [], [], []], "Input Dims": [[8, '
             '32, 512, 128], [8, 32, 512, 128], [8, 32, 512, 128], [], [], [], [], []]'),
    "to": ('"Concrete Inputs": ["", "", "", "", "", "True", "False", ""], "Input type": ["long int", "", "", "", '
           '"", "Scalar", "Scalar", ""], "Input Strides": [[512, 1], [], [], [], [], [], [], []], '
           '"Input Dims": [[8, 512], [], [], [], [], [], [], []]'),
    "none": None,
}

_HOST_PID = 2405173
_GPU_PID = 0
_MAIN_TID = 2405173
_BWD_TID = 2405612
_COMPUTE_STREAM = 7
_LAYER_ACTIVATIONS = 4 * 33_554_432 - 16_777_216  # net bytes a forward layer leaves allocated
_NCCL_STREAM = 20

_T_CPU = ('  {\n    "ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
          '    "args": {\n      "External id": %d,"Record function id": 0, %s"Ev Idx": %d\n    }\n  },\n')
_T_ANN = ('  {\n    "ph": "X", "cat": "user_annotation", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, '
          '"dur": %.3f,\n    "args": {\n      "External id": %d,"Record function id": 0, "Ev Idx": %d\n    }\n  },\n')
_T_RT = ('  {\n    "ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,'
         '\n    "args": {\n      "External id": %d, "cbid": %d, "correlation": %d\n    }\n  },\n')
_T_FLOW_S = ('  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g"\n'
             '  },\n')
_T_FLOW_F = ('  {\n    "ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g", '
             '"bp": "e"\n  },\n')
_T_KERNEL = ('  {\n    "ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
             '    "args": {\n      "External id": %d,\n      "queued": 0, "device": %d, "context": 1,\n'
             '      "stream": %d, "correlation": %d,\n%s    }\n  },\n')
_T_COPY = ('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
           '    "args": {\n      "External id": %d,\n      "device": %d, "context": 1,\n      "stream": %d, '
           '"correlation": %d,\n      "bytes": %d, "memory bandwidth (GB/s)": %.4f\n    }\n  },\n')
_T_GPU_ANN = ('  {\n    "ph": "X", "cat": "gpu_user_annotation", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, '
              '"dur": %.3f,\n    "args": {\n      "External id": %d\n    }\n  },\n')
_T_MEM = ('  {\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n    "pid": %d, "tid": %d,\n'
          '    "ts": %.3f,\n    "args": {\n      "Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, '
          '"Addr": %d, "Device Id": 0, "Device Type": 1, "Ev Idx": %d\n    }\n  },\n')


def _kernel_static(regs: int, smem: int, grid: tuple[int, int, int], block: tuple[int, int, int]) -> str:
    blocks = grid[0] * grid[1] * grid[2]
    warps = block[0] * block[1] * block[2] // 32
    return ('      "registers per thread": %d,\n      "shared memory": %d,\n      "blocks per SM": %s,\n'
            '      "warps per SM": %s,\n      "grid": [%d, %d, %d],\n      "block": [%d, %d, %d],\n'
            '      "est. achieved occupancy %%": %d\n') % (
        regs, smem, repr(round(blocks / 132, 6)), repr(round(blocks * warps / 132, 6)), *grid, *block,
        min(100, max(1, int(100 * warps * min(blocks, 132) / (132 * 64)))))


class _TraceWriter:
    """Simulates one rank of a bf16 transformer training loop (DDP, AdamW) and writes what Kineto records.

    Host events (cpu_op, user_annotation, [memory]) are written to ``host``; CUPTI activity (runtime calls,
    flow arrows, kernels, copies) to ``device``; Kineto also writes the host tree first and the device
    activity after it. Clocks are integer nanoseconds; ``ts``/``dur`` are written in µs with 3 decimals.
    """

    def __init__(self, host: TextIO, device: TextIO, seed: int, layers: int, micro_batches: int) -> None:
        self.host, self.device = host, device
        self.rng = random.Random(seed)
        self.layers, self.micro_batches = layers, micro_batches
        self.t = 5_290_372_469_436_741  # ns; Kineto's clock values are large
        self.t0 = self.t
        self.gpu = {_COMPUTE_STREAM: self.t, _NCCL_STREAM: self.t}
        self.ext_id = 1
        self.ev_idx = 0
        self.corr = 700_000
        self.allocated = 12 * 1024**3
        self.hbuf: list[Any] = []
        self.dbuf: list[str] = []
        self.bytes = 0
        self.c = {k: 0 for k in ("cpu_ops", "user_annotations", "runtime", "kernels", "nccl_kernels", "memcpy",
                                 "memset", "gpu_annotations", "memory_events", "flow_events")}
        self.kernels = {k: (v[0], v[1], _kernel_static(*v[2:])) for k, v in _KERNELS.items()}
        self.jitter = [0.85 + 0.3 * self.rng.random() for _ in range(997)]
        self.j = 0

    # -- helpers -------------------------------------------------------------------------------------
    def _jit(self) -> float:
        self.j = (self.j + 1) % 997
        return self.jitter[self.j]

    def _ids(self) -> tuple[int, int]:
        self.ext_id += 1
        self.ev_idx += 1
        return self.ext_id, self.ev_idx

    def op(self, name: str, tid: int, shapes: str | None, body: Callable[[], None] | None = None,
           self_us: float = 6.0, annotation: bool = False) -> None:
        """A host range: reserves its slot (parents precede children, as Kineto writes them), runs ``body``."""
        slot = len(self.hbuf)
        self.hbuf.append(None)
        start = self.t
        ext, idx = self._ids()
        self.t += int(self_us * 500 * self._jit())
        if body is not None:
            body()
        self.t += int(self_us * 500 * self._jit())
        dur = (self.t - start) / 1000
        if annotation:
            self.hbuf[slot] = _T_ANN % (name, _HOST_PID, tid, start / 1000, dur, ext, idx)
            self.c["user_annotations"] += 1
        else:
            extra = shapes + ", " if shapes else ""
            self.hbuf[slot] = _T_CPU % (name, _HOST_PID, tid, start / 1000, dur, ext, extra, idx)
            self.c["cpu_ops"] += 1

    def memory(self, tid: int, nbytes: int) -> None:
        self.allocated += nbytes
        _, idx = self._ids()
        self.hbuf.append(_T_MEM % (_HOST_PID, tid, self.t / 1000, 40 * 1024**3, self.allocated, nbytes,
                                   139_926_520_725_504 + (self.ev_idx % 65536) * 4096, idx))
        self.c["memory_events"] += 1

    def _runtime(self, name: str, cbid: int, tid: int, dur_ns: int) -> tuple[int, int]:
        self.corr += 1
        start = self.t
        self.dbuf.append(_T_RT % (name, _HOST_PID, tid, start / 1000, dur_ns / 1000, self.corr, cbid, self.corr))
        self.dbuf.append(_T_FLOW_S % (self.corr, _HOST_PID, tid, start / 1000))
        self.c["runtime"] += 1
        self.c["flow_events"] += 1
        self.t += dur_ns
        return start, self.corr

    def launch(self, key: str, tid: int, stream: int = _COMPUTE_STREAM, after: int | None = None) -> None:
        name, base_us, static = self.kernels[key]
        start_cpu, corr = self._runtime("cudaLaunchKernel", 211, tid, int(4200 * self._jit()))
        begin = max(self.gpu[stream], start_cpu + 3_000, after or 0)
        dur = int(base_us * 1000 * self._jit())
        self.gpu[stream] = begin + dur
        self.dbuf.append(_T_KERNEL % (name, _GPU_PID, stream, begin / 1000, dur / 1000, corr, _GPU_PID, stream,
                                      corr, static))
        self.dbuf.append(_T_FLOW_F % (corr, _GPU_PID, stream, begin / 1000))
        self.c["kernels"] += 1
        self.c["flow_events"] += 1
        if key == "nccl":
            self.c["nccl_kernels"] += 1

    def copy(self, kind: str, tid: int, nbytes: int, sync: bool = False) -> None:
        rt = "cudaMemsetAsync" if kind == "memset" else "cudaMemcpyAsync"
        start_cpu, corr = self._runtime(rt, 51 if kind == "memset" else 41, tid, int(6000 * self._jit()))
        stream = _COMPUTE_STREAM
        begin = max(self.gpu[stream], start_cpu + 4_000)
        gbps = 1800.0 if kind == "memset" else 22.0
        dur = max(1000, int(nbytes / gbps))
        self.gpu[stream] = begin + dur
        cat, label = {"h2d": ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"),
                      "d2h": ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)"),
                      "memset": ("gpu_memset", "Memset (Device)")}[kind]
        self.dbuf.append(_T_COPY % (cat, label, _GPU_PID, stream, begin / 1000, dur / 1000, corr, _GPU_PID, stream,
                                    corr, nbytes, nbytes / dur))
        self.dbuf.append(_T_FLOW_F % (corr, _GPU_PID, stream, begin / 1000))
        self.c["flow_events"] += 1
        self.c["memset" if kind == "memset" else "memcpy"] += 1
        if sync:
            wait = max(0, self.gpu[stream] - self.t) + 2_000
            self._runtime("cudaStreamSynchronize", 131, tid, wait)

    # -- the model ------------------------------------------------------------------------------------
    def linear(self, tid: int) -> None:
        def body() -> None:
            self.op("aten::t", tid, _SHAPES["mat2"], lambda: self.op("aten::transpose", tid, _SHAPES["mat2"],
                    lambda: self.op("aten::as_strided", tid, _SHAPES["mat2"], self_us=1.0), self_us=2.0),
                    self_us=2.0)
            self.op("aten::addmm", tid, _SHAPES["linear"], lambda: self.launch("gemm", tid), self_us=8.0)
            self.memory(tid, 33_554_432)
        self.op("aten::linear", tid, _SHAPES["linear"], body, self_us=4.0)

    def unary(self, name: str, inner: str, kernel: str, tid: int, shapes: str = "unary") -> None:
        self.op(name, tid, _SHAPES[shapes], lambda: self.op(inner, tid, _SHAPES[shapes],
                                                            lambda: self.launch(kernel, tid), self_us=7.0),
                self_us=3.0)

    def forward_layer(self) -> None:
        tid = _MAIN_TID
        self.unary("aten::layer_norm", "aten::native_layer_norm", "layer_norm", tid, "ln")
        self.linear(tid)
        self.op("aten::scaled_dot_product_attention", tid, _SHAPES["attn"],
                lambda: self.op("aten::_scaled_dot_product_flash_attention", tid, _SHAPES["attn"],
                                lambda: self.op("aten::_flash_attention_forward", tid, _SHAPES["attn"],
                                                lambda: self.launch("flash_fwd", tid), self_us=9.0), self_us=4.0),
                self_us=3.0)
        self.linear(tid)
        self.op("aten::add", tid, _SHAPES["binary"], lambda: self.launch("add", tid), self_us=6.0)
        self.unary("aten::layer_norm", "aten::native_layer_norm", "layer_norm", tid, "ln")
        self.linear(tid)
        self.unary("aten::gelu", "aten::gelu", "gelu", tid)
        self.linear(tid)
        self.op("aten::add", tid, _SHAPES["binary"], lambda: self.launch("add", tid), self_us=6.0)
        self.memory(tid, -16_777_216)

    def backward_node(self, node: str, ops: list[tuple[str, str, str]]) -> None:
        tid = _BWD_TID

        def body() -> None:
            def inner() -> None:
                for aten, shapes, kernel in ops:
                    self.op(aten, tid, _SHAPES[shapes], lambda k=kernel: self.launch(k, tid), self_us=7.0)
            self.op(node, tid, None, inner, self_us=3.0)
        self.op("autograd::engine::evaluate_function: " + node, tid, None, body, self_us=2.0)

    def backward_layer(self, layer: int) -> None:
        mm = [("aten::mm", "mat2", "gemm_nt"), ("aten::mm", "mat2", "gemm_nn")]
        self.backward_node("AddBackward0", [])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node("GeluBackward0", [("aten::gelu_backward", "binary", "gelu_bwd")])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node("NativeLayerNormBackward0", [("aten::native_layer_norm_backward", "ln", "layer_norm_bwd")])
        self.backward_node("AddBackward0", [])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node("ScaledDotProductFlashAttentionBackward0",
                           [("aten::_scaled_dot_product_flash_attention_backward", "attn", "flash_bwd")])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node("NativeLayerNormBackward0", [("aten::native_layer_norm_backward", "ln", "layer_norm_bwd")])
        self.memory(_BWD_TID, 8_388_608)
        self.memory(_BWD_TID, -_LAYER_ACTIVATIONS - 8_388_608)  # this layer's activations and grad scratch freed
        if (layer + 1) % 4 == 0:  # a DDP gradient bucket is ready: all-reduce on the NCCL stream (the last
            # one of the step is exposed: the optimizer waits for it)
            tid = _BWD_TID
            after = self.gpu[_COMPUTE_STREAM]

            def comm() -> None:
                self.op("nccl:all_reduce", tid, None, lambda: self.launch("nccl", tid, _NCCL_STREAM, after),
                        self_us=5.0, annotation=True)
            self.op("record_param_comms", tid, None, comm, self_us=4.0)

    def step(self, n: int) -> None:
        self.allocated = 12 * 1024**3
        step_start = self.t
        gpu_start = max(self.gpu[_COMPUTE_STREAM], step_start)
        main = _MAIN_TID

        def body() -> None:
            self.op("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", main, None, self_us=18_000.0,
                    annotation=True)
            for _ in range(2):
                self.op("aten::to", main, _SHAPES["to"], lambda: self.op("aten::_to_copy", main, _SHAPES["to"],
                        lambda: self.op("aten::copy_", main, _SHAPES["binary"],
                                        lambda: self.copy("h2d", main, 32_768), self_us=5.0), self_us=4.0),
                        self_us=2.0)
            self.op("Optimizer.zero_grad#AdamW.zero_grad", main, None, self_us=40.0, annotation=True)
            for _ in range(self.micro_batches):
                self.op("## forward ##", main, None, lambda: [self.forward_layer() for _ in range(self.layers)],
                        self_us=20.0, annotation=True)
                self.op("aten::cross_entropy_loss", main, _SHAPES["binary"], lambda: (
                    self.unary("aten::log_softmax", "aten::_log_softmax", "softmax", main),
                    self.unary("aten::nll_loss_nd", "aten::nll_loss_forward", "nll", main)), self_us=4.0)
                self.op("aten::zeros", main, None, lambda: self.op("aten::zero_", main, _SHAPES["unary"],
                        lambda: self.op("aten::fill_", main, _SHAPES["unary"], lambda: self.copy("memset", main, 4096),
                                        self_us=3.0), self_us=2.0), self_us=3.0)
                for layer in range(self.layers):
                    self.backward_layer(layer)
            self.gpu[_COMPUTE_STREAM] = max(self.gpu[_COMPUTE_STREAM], self.gpu[_NCCL_STREAM])

            def opt() -> None:
                for _ in range(max(1, self.layers // 4)):
                    self.op("aten::_fused_adamw_", main, _SHAPES["binary"], lambda: self.launch("adam", main),
                            self_us=12.0)
            self.op("Optimizer.step#AdamW.step", main, None, opt, self_us=30.0, annotation=True)
            self.op("aten::item", main, _SHAPES["unary"], lambda: self.op("aten::_local_scalar_dense", main,
                    _SHAPES["unary"], lambda: self.copy("d2h", main, 2, sync=True), self_us=3.0), self_us=2.0)

        self.op("ProfilerStep#%d" % n, main, None, body, self_us=15.0, annotation=True)
        ext, _ = self._ids()
        gpu_end = self.gpu[_COMPUTE_STREAM]
        self.dbuf.append(_T_GPU_ANN % ("ProfilerStep#%d" % n, _GPU_PID, _COMPUTE_STREAM, gpu_start / 1000,
                                       (gpu_end - gpu_start) / 1000, ext))
        self.c["gpu_annotations"] += 1
        self.t += 120_000  # the Python loop between two steps
        self._flush()

    def _flush(self) -> None:
        h = "".join(self.hbuf)
        d = "".join(self.dbuf)
        self.host.write(h)
        self.device.write(d)
        self.bytes += len(h) + len(d)
        self.hbuf.clear()
        self.dbuf.clear()


def _header(world_size: int, rank: int) -> str:
    props = ",\n".join(
        '    {\n      "id": %d, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 84929216512,\n'
        '      "computeMajor": 9, "computeMinor": 0,\n      "maxThreadsPerBlock": 1024, '
        '"maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, '
        '"warpSize": 32,\n      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472,\n'
        '      "numSms": 132, "sharedMemPerBlockOptin": 232448\n    }' % i for i in range(world_size))
    pg = ('{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": %d, '
          '"ranks": [%s]}' % (world_size, ", ".join(str(i) for i in range(world_size))))
    return ('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n%s\n  ],\n  "cupti_version": 24,\n'
            '  "cuda_runtime_version": 12040,\n  "with_flops": 0,\n  "record_shapes": 1,\n'
            '  "cuda_driver_version": 12080,\n  "profile_memory": 1,\n'
            '  "trace_id": "5B4A2C7E9D1F4E0A8C3B6D5E4F3A2B1C",\n'
            '  "distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d, "pg_count": 1, '
            '"pg_config": [%s], "nccl_version": "2.21.5"},\n  "traceEvents": [\n') % (props, rank, world_size, pg)


def _footer(w: _TraceWriter, name: str) -> tuple[str, int, int]:
    """Metadata events (process/thread names), the profiler's own span and the closing fields."""
    meta = []
    ts = w.t0 / 1000
    for pid, label, sort in ((_HOST_PID, "CPU", _HOST_PID), (_GPU_PID, "GPU 0", 16777216)):
        meta.append('  {\n    "name": "process_name", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n    "args": {\n'
                    '      "name": "python3"\n    }\n  },\n' % (ts, pid))
        meta.append('  {\n    "name": "process_labels", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n    "args": {\n'
                    '      "labels": "%s"\n    }\n  },\n' % (ts, pid, label))
        meta.append('  {\n    "name": "process_sort_index", "ph": "M", "ts": %.3f, "pid": %d, "tid": 0,\n'
                    '    "args": {\n      "sort_index": %d\n    }\n  },\n' % (ts, pid, sort))
    for pid, tid, label in ((_HOST_PID, _MAIN_TID, "thread %d (python3)" % _MAIN_TID),
                            (_HOST_PID, _BWD_TID, "thread %d (pt_autograd_0)" % _BWD_TID),
                            (_GPU_PID, _COMPUTE_STREAM, "stream %d " % _COMPUTE_STREAM),
                            (_GPU_PID, _NCCL_STREAM, "stream %d  nccl:all_reduce" % _NCCL_STREAM)):
        meta.append('  {\n    "name": "thread_name", "ph": "M", "ts": %.3f, "pid": %d, "tid": %d,\n    "args": {\n'
                    '      "name": "%s"\n    }\n  },\n' % (ts, pid, tid, label))
    end = max(w.t, *w.gpu.values())
    span = ('  {\n    "ph": "X", "cat": "Trace", "ts": %.3f, "dur": %.3f,\n'
            '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
            '    "args": {\n      "Op count": 0\n    }\n  },\n'
            % (ts, (end - w.t0) / 1000))
    tail = ('  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": %.3f\n  }\n'
            '  ],\n  "traceName": "%s",\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1740000000000000000\n}\n'
            % (end / 1000 + 10, name))
    return "".join(meta) + span + tail, len(meta), 1


def generate_kineto_trace(path: str | os.PathLike[str], target_bytes: int, *, seed: int = 0, layers: int = 32,
                          micro_batches: int = 4, world_size: int = 8, rank: int = 0) -> GenInfo:
    """Write a deterministic Kineto/PyTorch Profiler trace of about ``target_bytes`` (uncompressed JSON).

    One rank of a DDP bf16 transformer training: ``ProfilerStep#N`` spans, a DataLoader span, H2D copies,
    ``layers`` forward layers x ``micro_batches`` (cpu_op trees with record_shapes args, ``[memory]`` events),
    backward on the autograd thread, NCCL all-reduce kernels on their own stream overlapping compute,
    a fused AdamW step and a ``.item()`` sync. Every launch has a ``cuda_runtime`` event, its kernel/copy with
    the same ``correlation`` and an ``ac2g`` flow pair, in Kineto's own layout (one event over a few lines).
    Steps are written until the file reaches ``target_bytes`` (whole steps; at least one). Streams to disk: memory
    stays at one step's text. Same arguments, same bytes.
    """
    path = Path(path)
    t0 = time.perf_counter()
    head = _header(world_size, rank)
    device_tmp = path.with_name(path.name + ".device.part")
    with open(path, "w", encoding="ascii", buffering=8 * MiB) as host, \
            open(device_tmp, "w", encoding="ascii", buffering=8 * MiB) as device:
        host.write(head)
        w = _TraceWriter(host, device, seed, layers, micro_batches)
        w.bytes = len(head)
        steps = 0
        while steps == 0 or w.bytes < target_bytes - 4096:
            w.step(steps + 1)
            steps += 1
        tail, n_meta, n_span = _footer(w, path.name)
    with open(path, "ab") as out, open(device_tmp, "rb") as dev:
        shutil.copyfileobj(dev, out, 16 * MiB)
        out.write(tail.encode("ascii"))
    device_tmp.unlink()
    c = w.c
    complete = (c["cpu_ops"] + c["user_annotations"] + c["runtime"] + c["kernels"] + c["memcpy"] + c["memset"]
                + c["gpu_annotations"] + n_span)
    return GenInfo(path=str(path), bytes=path.stat().st_size, steps=steps, complete_events=complete,
                   metadata_events=n_meta, seconds=time.perf_counter() - t0, **c)


# ----------------------------------------------------------------------------------------------------------
# Child processes: one measurement each
# ----------------------------------------------------------------------------------------------------------

def _self_rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child_stepwise(path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from profilers.breakdown import breakdown
    from profilers.trace_load import load_trace
    t1 = time.perf_counter()
    base = _self_rss()
    c1 = time.process_time()
    trace = load_trace(path)
    t2 = time.perf_counter()
    b = breakdown(trace)
    t3 = time.perf_counter()
    c3 = time.process_time()
    return {"import_s": t1 - t0, "rss_after_import": base, "seconds": t3 - t1, "cpu_s": c3 - c1, "load_s": t2 - t1,
            "breakdown_s": t3 - t2, "events": int(len(trace.events)), "steps": int(b.n_steps),
            "memory_events": int(len(trace.memory)), "ranks": list(trace.ranks),
            "gpu_busy_share": b.gpu_busy_share, "shares": b.shares()}


def _read_decompressed(path: str) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _child_orjson(path: str, gc_off: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    import gc

    import orjson
    t1 = time.perf_counter()
    base = _self_rss()
    data = _read_decompressed(path)
    if gc_off:  # what Stepwise's loader does too: millions of acyclic dicts only feed the cyclic GC
        gc.disable()
    c2 = time.process_time()
    t2 = time.perf_counter()
    doc = orjson.loads(data)
    t3 = time.perf_counter()
    c3 = time.process_time()
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return {"import_s": t1 - t0, "rss_after_import": base, "seconds": t3 - t2, "cpu_s": c3 - c2, "read_s": t2 - t1,
            "bytes": len(data), "events": len(events), "gc": not gc_off}


def _child_hta(trace_dir: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis
    t1 = time.perf_counter()
    base = _self_rss()
    c1 = time.process_time()
    analysis = TraceAnalysis(trace_dir=trace_dir)
    t2 = time.perf_counter()
    bd = analysis.get_temporal_breakdown(visualize=False)
    t3 = time.perf_counter()
    c3 = time.process_time()  # one rank file: HTA parses it in this process (a pool only for several ranks)
    rows = bd.to_dict(orient="records") if hasattr(bd, "to_dict") else []
    events = sum(len(analysis.t.get_trace(r)) for r in analysis.t.get_ranks()) if hasattr(analysis, "t") else None
    return {"import_s": t1 - t0, "rss_after_import": base, "seconds": t3 - t1, "cpu_s": c3 - c1,
            "load_s": t2 - t1, "breakdown_s": t3 - t2, "events": events, "temporal_breakdown": rows}


_CHILDREN: dict[str, Callable[[str], dict[str, Any]]] = {
    "stepwise": _child_stepwise,
    "orjson": lambda p: _child_orjson(p, gc_off=True),
    "orjson_gc": _child_orjson,
    "hta": _child_hta,
}
KINDS = ("stepwise", "orjson", "orjson_gc", "hta")  # table order
KIND_TITLES = {
    "stepwise": "Stepwise load+breakdown",
    "orjson": "orjson.loads, gc off",
    "orjson_gc": "orjson.loads, gc on (default)",
    "hta": "HTA TraceAnalysis+temporal bd",
}


# ----------------------------------------------------------------------------------------------------------
# Parent: run a child, watch its memory and time, collect its answer
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Run:
    ok: bool
    seconds: float | None = None  # the work, measured inside the child
    wall_s: float = 0.0  # the whole child process, interpreter start and imports included
    peak_rss: int = 0  # bytes
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def _tree_rss(proc: Any) -> int:
    import psutil
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def measure(python: str, kind: str, target: str, *, timeout: float, rss_cap: int, env: dict[str, str] | None = None,
            workdir: Path) -> Run:
    """Run one contender in a fresh process; kill it (its whole process group) past ``timeout`` or ``rss_cap``."""
    import psutil
    out = workdir / f"result-{kind}-{os.getpid()}-{time.monotonic_ns()}.json"
    log = workdir / f"stderr-{kind}.log"
    cmd = [python, str(Path(__file__).resolve()), "--child", kind, "--child-target", target, "--child-out", str(out)]
    t0 = time.perf_counter()
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO), env=env,
                                start_new_session=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    reason = ""
    status = None
    rusage = None
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        peak = max(peak, _tree_rss(ps))
        elapsed = time.perf_counter() - t0
        if not reason and elapsed > timeout:
            reason = f"time limit of {timeout:.0f} s reached"
        elif not reason and peak > rss_cap:
            reason = f"memory cap reached (RSS {peak / GB:.1f} GB > {rss_cap / GB:.1f} GB)"
        elif not reason and psutil.virtual_memory().available < MIN_AVAILABLE:
            reason = (f"the machine ran low on memory (under {MIN_AVAILABLE / GB:.0f} GB available) at RSS "
                      f"{peak / GB:.1f} GB")
        if reason:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    peak = max(peak, rusage.ru_maxrss * 1024)
    if reason:
        return Run(False, None, wall, peak, reason)
    if proc.returncode != 0 or not out.exists():
        tail = log.read_text(errors="replace").strip().splitlines()
        last = next((ln for ln in reversed(tail) if ln.strip()), "no message")
        return Run(False, None, wall, peak, f"exit {proc.returncode}: {last[:200]}")
    detail = json.loads(out.read_text())
    out.unlink()
    return Run(True, float(detail["seconds"]), wall, peak, "", detail)


def ensure_hta_venv(venv: Path) -> str | None:
    """The python of the HTA venv, creating it (with a message) when missing. None when it cannot be made."""
    py = venv / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import hta.trace_analysis, psutil"],
                                        capture_output=True).returncode == 0
    if not ok:
        print(f"[setup] HTA venv {venv} missing or incomplete: creating it with {HTA_ENV_SCRIPT.name} "
              "(holistictraceanalysis from PyPI, about a minute)...", flush=True)
        r = subprocess.run(["bash", str(HTA_ENV_SCRIPT), str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"[setup] could not create the HTA venv: {(r.stderr or r.stdout).strip()[-400:]}", flush=True)
            return None
    return str(py)


def hta_folder(trace: Path, workdir: Path, name: str) -> Path:
    """HTA reads a folder of rank files: link the one trace there under a rank-named file name."""
    folder = workdir / f"hta-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if trace.name.endswith(".gz") else ".json"
    link = folder / f"rank-0{suffix}"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(trace.resolve())
    return folder


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------

@dataclass
class InputResult:
    label: str
    path: str
    file_bytes: int
    uncompressed_bytes: int
    note: str = ""
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def times(self, kind: str) -> list[float]:
        return [r.seconds for r in self.runs.get(kind, []) if r.ok and r.seconds is not None]

    def median(self, kind: str) -> float | None:
        t = self.times(kind)
        return statistics.median(t) if t and len(t) == len(self.runs.get(kind, [])) else None

    def median_cpu(self, kind: str) -> float | None:
        runs = self.runs.get(kind, [])
        cpu = [r.detail["cpu_s"] for r in runs if r.ok and "cpu_s" in r.detail]
        return statistics.median(cpu) if cpu and len(cpu) == len(runs) else None

    def peak(self, kind: str) -> int | None:
        runs = [r for r in self.runs.get(kind, []) if r.ok]
        return max(r.peak_rss for r in runs) if runs else None

    def failure(self, kind: str) -> str | None:
        bad = [r for r in self.runs.get(kind, []) if not r.ok]
        if not self.runs.get(kind):
            return "not run"
        return bad[0].reason if bad else None


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / GB:.2f} GB" if n >= GB else f"{n / MiB:.0f} MiB" if n >= 10 * MiB else f"{n / MiB:.1f} MiB"


def _time_cell(res: InputResult, kind: str) -> str:
    fail = res.failure(kind)
    if fail == "not run":
        return "skipped"
    if fail:
        return f"did not finish: {fail}"
    t = res.times(kind)
    med = statistics.median(t)
    if len(t) == 1:
        return f"{med:.3f} s (n=1)"
    return f"{med:.3f} s  [{min(t):.3f}-{max(t):.3f}] n={len(t)}"


def _peak_cell(res: InputResult, kind: str) -> str:
    p = res.peak(kind)
    if p is None:
        runs = res.runs.get(kind, [])
        return f"(>= {_size(max(r.peak_rss for r in runs))} when stopped)" if runs else "-"
    return f"{_size(p)} ({p / res.uncompressed_bytes:.2f}x file)"


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def render(results: list[InputResult], context: str = "") -> str:
    label_w = 38
    col_w = max(46, *(len(r.label) + 2 for r in results))
    lines: list[str] = []
    rule = "-" * (label_w + col_w * len(results))

    def row(label: str, cells: list[str]) -> None:
        lines.append(label.ljust(label_w) + "".join(c.ljust(col_w) for c in cells).rstrip())

    def first(r: InputResult, kind: str, key: str) -> Any:
        runs = [x for x in r.runs.get(kind, []) if x.ok]
        return runs[0].detail.get(key, "-") if runs else "-"

    row("", [r.label for r in results])
    row("file (on disk / uncompressed JSON)", [f"{_size(r.file_bytes)} / {_size(r.uncompressed_bytes)}"
                                                 for r in results])
    row("events (Stepwise X / all in JSON)", [f"{first(r, 'stepwise', 'events')} / {first(r, 'orjson', 'events')}"
                                               for r in results])
    lines.append(rule)
    for kind in KINDS:
        if not any(kind in r.runs for r in results):
            continue
        row(f"{KIND_TITLES[kind]}: time", [_time_cell(r, kind) for r in results])
        row("    cpu time (user+sys, median)", [f"{c:.3f} s" if (c := r.median_cpu(kind)) is not None else "-"
                                                 for r in results])
        row("    peak RSS (whole process)", [_peak_cell(r, kind) for r in results])
    lines.append(rule)

    def verdict(v: float | None, target: float | None, higher_is_better: bool = False) -> str:
        if v is None:
            return "n/a"
        if target is None:
            return f"{v:.2f}x"
        ok = v >= target if higher_is_better else v <= target
        return f"{v:.2f}x  {'MET' if ok else 'MISSED'}"

    def both(num: str, den: str, target: float, higher_is_better: bool = False) -> list[str]:
        out = []
        for r in results:
            cell = verdict(_ratio(r.median(num), r.median(den)), target, higher_is_better)
            cpu = _ratio(r.median_cpu(num), r.median_cpu(den))
            out.append(cell + (f"   (cpu time: {verdict(cpu, target, higher_is_better)})" if cpu else ""))
        return out

    row(f"HTA / Stepwise time (target >= {TARGET_HTA_SPEEDUP:.0f}x)",
        both("hta", "stepwise", TARGET_HTA_SPEEDUP, True))
    row(f"Stepwise / orjson gc off (<= {TARGET_ORJSON_RATIO:.0f}x)", both("stepwise", "orjson", TARGET_ORJSON_RATIO))
    row(f"Stepwise / orjson gc on  (<= {TARGET_ORJSON_RATIO:.0f}x)", both("stepwise", "orjson_gc", TARGET_ORJSON_RATIO))
    row(f"Stepwise peak / JSON size (< {TARGET_PEAK_RATIO:.0f}x)",
        [verdict(_ratio(r.peak("stepwise"), r.uncompressed_bytes),
                 TARGET_PEAK_RATIO - 1e-9 if r.uncompressed_bytes >= PEAK_TARGET_MIN_BYTES else None)
         + ("" if r.uncompressed_bytes >= PEAK_TARGET_MIN_BYTES else "  (target is for the 1 GB trace)")
         for r in results])
    row("  same, less RSS after imports", [verdict(_ratio(
        (r.peak("stepwise") or 0) - first(r, "stepwise", "rss_after_import") if r.peak("stepwise") else None,
        r.uncompressed_bytes), None) for r in results])
    row("HTA peak / Stepwise peak", [verdict(_ratio(r.peak("hta"), r.peak("stepwise")), None) for r in results])
    lines.append("")
    lines.append("time = wall time of the work inside a fresh child process (imports excluded); [min-max] over n "
                 "runs, run round-robin; cpu time = the same work's user+sys CPU, which other load on the machine "
                 "moves far less; peak RSS = the child's maximum resident set (interpreter and imports included).")
    if context:
        lines.append(context)
    for r in results:
        lines.append(f"[{r.label}] {r.note}".rstrip())
        for kind in KINDS:
            runs = [x for x in r.runs.get(kind, []) if x.ok]
            if not runs:
                continue
            d = runs[0].detail
            if kind == "stepwise":
                lines.append(f"  Stepwise: load {d['load_s']:.3f} s + breakdown {d['breakdown_s']:.3f} s (first run); "
                             f"{d['steps']} steps, ranks {d['ranks']}; GPU busy {d['gpu_busy_share']:.1%}; "
                             f"RSS after imports {_size(d['rss_after_import'])}; imports {d['import_s']:.2f} s")
            elif kind.startswith("orjson"):
                lines.append(f"  {KIND_TITLES[kind]}: reading (+gunzip) the file first took {d['read_s']:.3f} s "
                             f"(not counted); RSS after imports {_size(d['rss_after_import'])}")
            elif kind == "hta":
                lines.append(f"  HTA: load {d['load_s']:.3f} s + temporal breakdown {d['breakdown_s']:.3f} s (first "
                             f"run); RSS after imports {_size(d['rss_after_import'])}; imports {d['import_s']:.2f} s")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------

def _bench_input(res: InputResult, target: Path, repeats: int, args: argparse.Namespace, hta_py: str | None,
                 workdir: Path, name: str) -> None:
    """Measure every contender ``repeats`` times, round-robin (so a load change on a shared machine hits all
    of them alike). A contender that fails once is not run again."""
    kinds = [k for k in KINDS if k != "hta" or not args.skip_hta]
    for k in kinds:
        res.runs[k] = []
    if "hta" in kinds and hta_py is None:
        res.runs["hta"] = [Run(False, reason="the HTA venv could not be created")]
        kinds.remove("hta")
    hta_dir = hta_folder(target, workdir, name) if "hta" in kinds else None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for i in range(repeats):
        for kind in kinds:
            if any(not r.ok for r in res.runs[kind]):
                continue
            if kind == "hta":
                print(f"  {name}: hta run {i + 1}/{repeats} (limits: {args.hta_timeout:.0f} s, RSS "
                      f"{args.hta_rss_cap_gb:g} GB) ...", flush=True)
                run = measure(str(hta_py), kind, str(hta_dir), timeout=args.hta_timeout,
                              rss_cap=int(args.hta_rss_cap_gb * GB), env=env, workdir=workdir)
            else:
                print(f"  {name}: {kind} run {i + 1}/{repeats} ...", flush=True)
                run = measure(sys.executable, kind, str(target), timeout=args.timeout,
                              rss_cap=int(args.rss_cap_gb * GB), workdir=workdir)
            res.runs[kind].append(run)
            status = f"{run.seconds:.3f} s" if run.ok else f"did not finish: {run.reason}"
            print(f"    -> {status}, peak RSS {_size(run.peak_rss)}", flush=True)


def _uncompressed_size(path: Path) -> int:
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(16 * MiB):
            n += len(chunk)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--synthetic-gb", type=float, default=1.0, help="size of the generated trace, GB (10^9 bytes)")
    ap.add_argument("--skip-hta", action="store_true", help="do not run (or install) Holistic Trace Analysis")
    ap.add_argument("--skip-shared", action="store_true", help="do not benchmark the shared 216k-event trace")
    ap.add_argument("--repeats", type=int, default=3, help="runs per contender on the shared trace (median)")
    ap.add_argument("--big-repeats", type=int, default=1, help="runs per contender on the synthetic trace")
    ap.add_argument("--layers", type=int, default=32, help="synthetic model: transformer layers per micro-batch")
    ap.add_argument("--micro-batches", type=int, default=4, help="synthetic model: micro-batches per step")
    ap.add_argument("--timeout", type=float, default=900, help="time limit per Stepwise/orjson run, s")
    ap.add_argument("--rss-cap-gb", type=float, default=18, help="RSS cap per Stepwise/orjson run, GB")
    ap.add_argument("--hta-timeout", type=float, default=600, help="time limit per HTA run, s")
    ap.add_argument("--hta-rss-cap-gb", type=float, default=16, help="RSS cap per HTA run, GB")
    ap.add_argument("--hta-venv", type=Path, default=HTA_VENV)
    ap.add_argument("--workdir", type=Path, default=None, help="where the synthetic trace goes (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    ap.add_argument("--child", choices=sorted(_CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--child-target", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        result = _CHILDREN[args.child](args.child_target)
        Path(args.child_out).write_text(json.dumps(result, default=str))
        return 0

    load_start = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="stepwise-bench-", dir=args.workdir))
    results: list[InputResult] = []
    try:
        hta_py = None if args.skip_hta else ensure_hta_venv(args.hta_venv)
        if not args.skip_shared:
            if SHARED_TRACE.exists():
                res = InputResult(f"shared {SHARED_TRACE.name}", str(SHARED_TRACE), SHARED_TRACE.stat().st_size,
                                  _uncompressed_size(SHARED_TRACE), note=f"median of {args.repeats}")
                print(f"[1] {SHARED_TRACE}", flush=True)
                _bench_input(res, SHARED_TRACE, args.repeats, args, hta_py, workdir, "shared")
                results.append(res)
            else:
                print(f"[1] shared trace not found at {SHARED_TRACE}: skipped", flush=True)
        target = int(args.synthetic_gb * GB)
        synth = workdir / "synthetic_rank0.pt.trace.json"
        print(f"[2] generating a {args.synthetic_gb:g} GB synthetic Kineto trace in {workdir} ...", flush=True)
        info = generate_kineto_trace(synth, target, layers=args.layers, micro_batches=args.micro_batches)
        print(f"    {_size(info.bytes)}, {info.steps} steps, {info.complete_events} X events, {info.kernels} kernels "
              f"({info.nccl_kernels} NCCL), {info.memory_events} [memory], {info.flow_events} flow events; "
              f"generated in {info.seconds:.1f} s", flush=True)
        res = InputResult(f"synthetic {_size(info.bytes)}", str(synth), info.bytes, info.bytes,
                          note=f"{info.steps} steps, {info.complete_events} X events; "
                               f"{'median of %d' % args.big_repeats if args.big_repeats > 1 else 'a single run each'}")
        _bench_input(res, synth, args.big_repeats, args, hta_py, workdir, "synthetic")
        results.append(res)
        load = os.getloadavg()
        context = (f"machine: {os.cpu_count()} cores; load average {load_start[0]:.1f} at start, {load[0]:.1f} at "
                   "the end (other work on a shared machine slows every contender)")
        table = render(results, context)
        print()
        print(table)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"generated": asdict(info), "results": [asdict(r) for r in results]},
                                            indent=1, default=str))
    finally:
        if args.keep:
            print(f"(kept {workdir})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
