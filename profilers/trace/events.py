"""The normalised trace model: one columnar table of events per trace set, built once at load.

``Trace.events`` (pandas DataFrame, one row per complete event, sorted by ``rank, start_ns``):

=============  ==========  ===============================================================================
column         dtype       meaning
=============  ==========  ===============================================================================
rank           int32       distributed rank (``distributedInfo.rank``, else from the file name, else order)
kind           category    one of :data:`KINDS` (normalised from Kineto's ``cat``, any capitalisation)
name           category    event name, interned
start_ns       int64       start, integer **nanoseconds** on the trace clock (Kineto ``ts`` is in µs)
dur_ns         int64       duration in nanoseconds (negative or missing durations are dropped at load)
end_ns         int64       ``start_ns + dur_ns`` (events with a start or end beyond ±2**62 ns are dropped at load)
pid            int64       process id (GPU events: device id in most Kineto versions)
tid            category    thread id or stream label as written (strings in old schemas)
device         int16       GPU device index for GPU-side events, -1 for host events
stream         int32       CUDA/HIP stream for GPU-side events, -1 for host events
correlation    int64       CPU launch <-> GPU activity link (``args.correlation``, exact), -1 if absent or beyond int64
dtype          category    first ``Input type`` of a host op when record_shapes was on ("float", "c10::BFloat16"), else ""
shapes         category    record_shapes ``Input Dims`` of a host op as compact JSON text ("[[8,16],[16,4]]"), else ""
step           int64       ``N`` of the ``ProfilerStep#N`` the event starts in on its rank, -1 outside steps
=============  ==========  ===============================================================================

``Trace.steps``: ``rank, step, start_ns, end_ns`` — the CPU ``ProfilerStep#N`` spans, ``step`` the exact ``N`` (a
``gpu_user_annotation`` copy of a step on the GPU timeline is not a step). With no markers the whole window
of each rank is one step ``0`` and ``steps_inferred`` is true.

``Trace.memory``: ``rank, ts_ns, device_type, device_id, bytes, total_allocated, total_reserved`` from
``[memory]`` instant events (device_type 1 = CUDA/HIP, 0 = CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from profilers.trace.kinds import GPU_KINDS, KINDS, kind_of  # noqa: F401  (re-exported: the column names' kinds)


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU named in ``deviceProperties`` (or old ``computeProperties``)."""

    index: int
    name: str
    total_memory_bytes: int | None


@dataclass(frozen=True)
class Trace:
    """One trace set (one or more ranks), normalised. See the module docs for the columns."""

    events: pd.DataFrame
    steps: pd.DataFrame
    memory: pd.DataFrame
    ranks: tuple[int, ...]
    devices: tuple[DeviceInfo, ...]
    world_size: int | None
    backend: str | None
    steps_inferred: bool
    source: str
    warnings: tuple[str, ...] = field(default=())
    # A non-GPU accelerator's family ("MTIA") read from the trace when deviceProperties names no
    # device (profilers.efficiency.accelerator); None for GPU and CPU traces.
    accelerator: str | None = None
    # The CUDA runtime the profiled process used ("12.4"), from Kineto's top-level
    # ``cuda_runtime_version``; None where the trace does not say.
    cuda_runtime: str | None = None

    @property
    def has_gpu(self) -> bool:
        """True when any rank recorded GPU-side activity (kernels, copies or sets)."""
        kinds = self.events["kind"]
        return bool(kinds.isin(["kernel", "memcpy", "memset"]).any())

    @property
    def device_name(self) -> str:
        if self.devices:
            return self.devices[0].name
        if self.accelerator is not None:
            return self.accelerator
        return "GPU" if self.has_gpu else "CPU"

    @property
    def total_device_memory(self) -> int | None:
        sizes = [d.total_memory_bytes for d in self.devices if d.total_memory_bytes]
        return min(sizes) if sizes else None

    @property
    def n_events(self) -> int:
        return int(len(self.events))
