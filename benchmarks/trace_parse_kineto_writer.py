"""The event-level half of the synthetic Kineto trace: one rank's clocks, ids and counters, and the events.

:class:`KinetoWriter` knows how each profiled activity is written (a host range, a ``[memory]`` instant, a
kernel launch with its runtime call and flow arrows, a copy or memset); :mod:`trace_parse_kineto_model` decides
which activities a training step has.
"""

from __future__ import annotations

import random
from typing import Any, Callable, TextIO

from trace_parse_kineto_format import (
    COMPUTE_STREAM,
    GPU_PID,
    HOST_PID,
    KERNELS,
    NCCL_STREAM,
    T_ANN,
    T_COPY,
    T_CPU,
    T_FLOW_F,
    T_FLOW_S,
    T_KERNEL,
    T_MEM,
    T_RT,
    kernel_static,
)


class KinetoWriter:
    """Writes what Kineto records for one rank, in order, to two streams.

    Host events (cpu_op, user_annotation, [memory]) are written to ``host``; CUPTI activity (runtime calls,
    flow arrows, kernels, copies) to ``device``; Kineto also writes the host tree first and the device
    activity after it. Clocks are integer nanoseconds; ``ts``/``dur`` are written in µs with 3 decimals.
    """

    def __init__(self, host: TextIO, device: TextIO, seed: int) -> None:
        self.host, self.device = host, device
        self.rng = random.Random(seed)
        self.t = 5_290_372_469_436_741  # ns; Kineto's clock values are large
        self.t0 = self.t
        self.gpu = {COMPUTE_STREAM: self.t, NCCL_STREAM: self.t}
        self.ext_id = 1
        self.ev_idx = 0
        self.corr = 700_000
        self.allocated = 12 * 1024**3
        self.hbuf: list[Any] = []
        self.dbuf: list[str] = []
        self.bytes = 0
        self.c = {
            k: 0
            for k in (
                "cpu_ops",
                "user_annotations",
                "runtime",
                "kernels",
                "nccl_kernels",
                "memcpy",
                "memset",
                "gpu_annotations",
                "memory_events",
                "flow_events",
            )
        }
        self.kernels = {k: (v[0], v[1], kernel_static(*v[2:])) for k, v in KERNELS.items()}
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

    def op(
        self,
        name: str,
        tid: int,
        shapes: str | None,
        body: Callable[[], None] | None = None,
        self_us: float = 6.0,
        annotation: bool = False,
    ) -> None:
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
            self.hbuf[slot] = T_ANN % (name, HOST_PID, tid, start / 1000, dur, ext, idx)
            self.c["user_annotations"] += 1
        else:
            extra = shapes + ", " if shapes else ""
            self.hbuf[slot] = T_CPU % (name, HOST_PID, tid, start / 1000, dur, ext, extra, idx)
            self.c["cpu_ops"] += 1

    def memory(self, tid: int, nbytes: int) -> None:
        self.allocated += nbytes
        _, idx = self._ids()
        self.hbuf.append(
            T_MEM
            % (
                HOST_PID,
                tid,
                self.t / 1000,
                40 * 1024**3,
                self.allocated,
                nbytes,
                139_926_520_725_504 + (self.ev_idx % 65536) * 4096,
                idx,
            )
        )
        self.c["memory_events"] += 1

    def _runtime(self, name: str, cbid: int, tid: int, dur_ns: int) -> tuple[int, int]:
        self.corr += 1
        start = self.t
        self.dbuf.append(
            T_RT % (name, HOST_PID, tid, start / 1000, dur_ns / 1000, self.corr, cbid, self.corr)
        )
        self.dbuf.append(T_FLOW_S % (self.corr, HOST_PID, tid, start / 1000))
        self.c["runtime"] += 1
        self.c["flow_events"] += 1
        self.t += dur_ns
        return start, self.corr

    def launch(
        self, key: str, tid: int, stream: int = COMPUTE_STREAM, after: int | None = None
    ) -> None:
        name, base_us, static = self.kernels[key]
        start_cpu, corr = self._runtime("cudaLaunchKernel", 211, tid, int(4200 * self._jit()))
        begin = max(self.gpu[stream], start_cpu + 3_000, after or 0)
        dur = int(base_us * 1000 * self._jit())
        self.gpu[stream] = begin + dur
        self.dbuf.append(
            T_KERNEL
            % (name, GPU_PID, stream, begin / 1000, dur / 1000, corr, GPU_PID, stream, corr, static)
        )
        self.dbuf.append(T_FLOW_F % (corr, GPU_PID, stream, begin / 1000))
        self.c["kernels"] += 1
        self.c["flow_events"] += 1
        if key == "nccl":
            self.c["nccl_kernels"] += 1

    def copy(self, kind: str, tid: int, nbytes: int, sync: bool = False) -> None:
        rt = "cudaMemsetAsync" if kind == "memset" else "cudaMemcpyAsync"
        start_cpu, corr = self._runtime(
            rt, 51 if kind == "memset" else 41, tid, int(6000 * self._jit())
        )
        stream = COMPUTE_STREAM
        begin = max(self.gpu[stream], start_cpu + 4_000)
        gbps = 1800.0 if kind == "memset" else 22.0
        dur = max(1000, int(nbytes / gbps))
        self.gpu[stream] = begin + dur
        cat, label = {
            "h2d": ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)"),
            "d2h": ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)"),
            "memset": ("gpu_memset", "Memset (Device)"),
        }[kind]
        self.dbuf.append(
            T_COPY
            % (
                cat,
                label,
                GPU_PID,
                stream,
                begin / 1000,
                dur / 1000,
                corr,
                GPU_PID,
                stream,
                corr,
                nbytes,
                nbytes / dur,
            )
        )
        self.dbuf.append(T_FLOW_F % (corr, GPU_PID, stream, begin / 1000))
        self.c["flow_events"] += 1
        self.c["memset" if kind == "memset" else "memcpy"] += 1
        if sync:
            wait = max(0, self.gpu[stream] - self.t) + 2_000
            self._runtime("cudaStreamSynchronize", 131, tid, wait)

    def _flush(self) -> None:
        h = "".join(self.hbuf)
        d = "".join(self.dbuf)
        self.host.write(h)
        self.device.write(d)
        self.bytes += len(h) + len(d)
        self.hbuf.clear()
        self.dbuf.clear()
