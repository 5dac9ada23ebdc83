"""The training-loop half of the synthetic Kineto trace: what one rank of a DDP bf16 transformer does per step.

Forward layers (cpu_op trees with record_shapes args and ``[memory]`` events) on the main thread, backward on
the autograd thread with NCCL all-reduces per gradient bucket, a fused AdamW step and a ``.item()`` sync; the
events themselves are written by :class:`trace_parse_kineto_writer.KinetoWriter`.
"""

from __future__ import annotations

from typing import TextIO

from trace_parse_kineto_format import (
    BWD_TID,
    COMPUTE_STREAM,
    GPU_PID,
    LAYER_ACTIVATIONS,
    MAIN_TID,
    NCCL_STREAM,
    SHAPES,
    T_GPU_ANN,
)
from trace_parse_kineto_writer import KinetoWriter


class TraceWriter(KinetoWriter):
    """Simulates one rank of a bf16 transformer training loop (DDP, AdamW) and writes what Kineto records."""

    def __init__(
        self, host: TextIO, device: TextIO, seed: int, layers: int, micro_batches: int
    ) -> None:
        super().__init__(host, device, seed)
        self.layers, self.micro_batches = layers, micro_batches

    # -- one step ---------------------------------------------------------------------------------------
    def linear(self, tid: int) -> None:
        def body() -> None:
            self.op(
                "aten::t",
                tid,
                SHAPES["mat2"],
                lambda: self.op(
                    "aten::transpose",
                    tid,
                    SHAPES["mat2"],
                    lambda: self.op("aten::as_strided", tid, SHAPES["mat2"], self_us=1.0),
                    self_us=2.0,
                ),
                self_us=2.0,
            )
            self.op(
                "aten::addmm", tid, SHAPES["linear"], lambda: self.launch("gemm", tid), self_us=8.0
            )
            self.memory(tid, 33_554_432)

        self.op("aten::linear", tid, SHAPES["linear"], body, self_us=4.0)

    def unary(self, name: str, inner: str, kernel: str, tid: int, shapes: str = "unary") -> None:
        self.op(
            name,
            tid,
            SHAPES[shapes],
            lambda: self.op(
                inner, tid, SHAPES[shapes], lambda: self.launch(kernel, tid), self_us=7.0
            ),
            self_us=3.0,
        )

    def forward_layer(self) -> None:
        tid = MAIN_TID
        self.unary("aten::layer_norm", "aten::native_layer_norm", "layer_norm", tid, "ln")
        self.linear(tid)
        self.op(
            "aten::scaled_dot_product_attention",
            tid,
            SHAPES["attn"],
            lambda: self.op(
                "aten::_scaled_dot_product_flash_attention",
                tid,
                SHAPES["attn"],
                lambda: self.op(
                    "aten::_flash_attention_forward",
                    tid,
                    SHAPES["attn"],
                    lambda: self.launch("flash_fwd", tid),
                    self_us=9.0,
                ),
                self_us=4.0,
            ),
            self_us=3.0,
        )
        self.linear(tid)
        self.op("aten::add", tid, SHAPES["binary"], lambda: self.launch("add", tid), self_us=6.0)
        self.unary("aten::layer_norm", "aten::native_layer_norm", "layer_norm", tid, "ln")
        self.linear(tid)
        self.unary("aten::gelu", "aten::gelu", "gelu", tid)
        self.linear(tid)
        self.op("aten::add", tid, SHAPES["binary"], lambda: self.launch("add", tid), self_us=6.0)
        self.memory(tid, -16_777_216)

    def backward_node(self, node: str, ops: list[tuple[str, str, str]]) -> None:
        tid = BWD_TID

        def body() -> None:
            def inner() -> None:
                for aten, shapes, kernel in ops:
                    self.op(
                        aten, tid, SHAPES[shapes], lambda k=kernel: self.launch(k, tid), self_us=7.0
                    )

            self.op(node, tid, None, inner, self_us=3.0)

        self.op("autograd::engine::evaluate_function: " + node, tid, None, body, self_us=2.0)

    def backward_layer(self, layer: int) -> None:
        mm = [("aten::mm", "mat2", "gemm_nt"), ("aten::mm", "mat2", "gemm_nn")]
        self.backward_node("AddBackward0", [])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node("GeluBackward0", [("aten::gelu_backward", "binary", "gelu_bwd")])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node(
            "NativeLayerNormBackward0",
            [("aten::native_layer_norm_backward", "ln", "layer_norm_bwd")],
        )
        self.backward_node("AddBackward0", [])
        self.backward_node("AddmmBackward0", mm)
        self.backward_node(
            "ScaledDotProductFlashAttentionBackward0",
            [("aten::_scaled_dot_product_flash_attention_backward", "attn", "flash_bwd")],
        )
        self.backward_node("AddmmBackward0", mm)
        self.backward_node(
            "NativeLayerNormBackward0",
            [("aten::native_layer_norm_backward", "ln", "layer_norm_bwd")],
        )
        self.memory(BWD_TID, 8_388_608)
        self.memory(
            BWD_TID, -LAYER_ACTIVATIONS - 8_388_608
        )  # this layer's activations and grad scratch freed
        if (
            layer + 1
        ) % 4 == 0:  # a DDP gradient bucket is ready: all-reduce on the NCCL stream (the last
            # one of the step is exposed: the optimizer waits for it)
            tid = BWD_TID
            after = self.gpu[COMPUTE_STREAM]

            def comm() -> None:
                self.op(
                    "nccl:all_reduce",
                    tid,
                    None,
                    lambda: self.launch("nccl", tid, NCCL_STREAM, after),
                    self_us=5.0,
                    annotation=True,
                )

            self.op("record_param_comms", tid, None, comm, self_us=4.0)

    def step(self, n: int) -> None:
        self.allocated = 12 * 1024**3
        step_start = self.t
        gpu_start = max(self.gpu[COMPUTE_STREAM], step_start)
        main = MAIN_TID

        def body() -> None:
            self.op(
                "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                main,
                None,
                self_us=18_000.0,
                annotation=True,
            )
            for _ in range(2):
                self.op(
                    "aten::to",
                    main,
                    SHAPES["to"],
                    lambda: self.op(
                        "aten::_to_copy",
                        main,
                        SHAPES["to"],
                        lambda: self.op(
                            "aten::copy_",
                            main,
                            SHAPES["binary"],
                            lambda: self.copy("h2d", main, 32_768),
                            self_us=5.0,
                        ),
                        self_us=4.0,
                    ),
                    self_us=2.0,
                )
            self.op(
                "Optimizer.zero_grad#AdamW.zero_grad", main, None, self_us=40.0, annotation=True
            )
            for _ in range(self.micro_batches):
                self.op(
                    "## forward ##",
                    main,
                    None,
                    lambda: [self.forward_layer() for _ in range(self.layers)],
                    self_us=20.0,
                    annotation=True,
                )
                self.op(
                    "aten::cross_entropy_loss",
                    main,
                    SHAPES["binary"],
                    lambda: (
                        self.unary("aten::log_softmax", "aten::_log_softmax", "softmax", main),
                        self.unary("aten::nll_loss_nd", "aten::nll_loss_forward", "nll", main),
                    ),
                    self_us=4.0,
                )
                self.op(
                    "aten::zeros",
                    main,
                    None,
                    lambda: self.op(
                        "aten::zero_",
                        main,
                        SHAPES["unary"],
                        lambda: self.op(
                            "aten::fill_",
                            main,
                            SHAPES["unary"],
                            lambda: self.copy("memset", main, 4096),
                            self_us=3.0,
                        ),
                        self_us=2.0,
                    ),
                    self_us=3.0,
                )
                for layer in range(self.layers):
                    self.backward_layer(layer)
            self.gpu[COMPUTE_STREAM] = max(self.gpu[COMPUTE_STREAM], self.gpu[NCCL_STREAM])

            def opt() -> None:
                for _ in range(max(1, self.layers // 4)):
                    self.op(
                        "aten::_fused_adamw_",
                        main,
                        SHAPES["binary"],
                        lambda: self.launch("adam", main),
                        self_us=12.0,
                    )

            self.op("Optimizer.step#AdamW.step", main, None, opt, self_us=30.0, annotation=True)
            self.op(
                "aten::item",
                main,
                SHAPES["unary"],
                lambda: self.op(
                    "aten::_local_scalar_dense",
                    main,
                    SHAPES["unary"],
                    lambda: self.copy("d2h", main, 2, sync=True),
                    self_us=3.0,
                ),
                self_us=2.0,
            )

        self.op("ProfilerStep#%d" % n, main, None, body, self_us=15.0, annotation=True)
        ext, _ = self._ids()
        gpu_end = self.gpu[COMPUTE_STREAM]
        self.dbuf.append(
            T_GPU_ANN
            % (
                "ProfilerStep#%d" % n,
                GPU_PID,
                COMPUTE_STREAM,
                gpu_start / 1000,
                (gpu_end - gpu_start) / 1000,
                ext,
            )
        )
        self.c["gpu_annotations"] += 1
        self.t += 120_000  # the Python loop between two steps
        self._flush()
