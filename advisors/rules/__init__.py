"""The advisor's rules, one small class per file. ``RULES`` is the explicit, ordered list: the order breaks
ties between findings of equal severity (more specific rules first within a class)."""

from __future__ import annotations

from advisors.rules.base import Example, Rule
from advisors.rules.communication.exposed import ExposedCommunication
from advisors.rules.communication.low_overlap import LowOverlap
from advisors.rules.communication.straggler import Straggler
from advisors.rules.compute.cpu_fp32_matmul import CpuFp32Matmul
from advisors.rules.compute.cudnn_benchmark import CudnnBenchmarkOff
from advisors.rules.compute.dominant import DeviceDominates
from advisors.rules.compute.fp32_gemm import Fp32Gemms
from advisors.rules.compute.hand_attention import HandAttention
from advisors.rules.compute.not_compiled import NotCompiled
from advisors.rules.compute.saturated import SaturatedDevice
from advisors.rules.data.idle_while_loading import DeviceIdleWhileLoading
from advisors.rules.data.loader_exposed import LoaderStarvesStep
from advisors.rules.data.pageable_copies import PageableCopies
from advisors.rules.data.saturated_host import LoaderOnSaturatedHost
from advisors.rules.data.single_process import SingleProcessLoading
from advisors.rules.host.host_bound import HostBound
from advisors.rules.host.launch_bound import LaunchBound
from advisors.rules.host.syncs import FrequentSyncs
from advisors.rules.host.threads import OversubscribedThreads
from advisors.rules.memory.allocator_churn import AllocatorChurn
from advisors.rules.memory.bandwidth import BandwidthBound
from advisors.rules.memory.capacity import NearCapacity
from advisors.rules.memory.creep import MemoryCreep
from advisors.rules.memory.out_of_memory import OutOfMemory
from advisors.rules.memory.profiler_outgrew import ProfilerOutgrew
from advisors.rules.memory.snapshot_fragmentation import SnapshotFragmentation
from advisors.rules.memory.snapshot_peak import SnapshotPeak
from advisors.rules.compute.loss_plateau import LossPlateau

RULES: tuple[type[Rule], ...] = (
    OutOfMemory,
    MemoryCreep,
    ProfilerOutgrew,
    NearCapacity,
    SnapshotPeak,
    SnapshotFragmentation,
    AllocatorChurn,
    BandwidthBound,
    LoaderOnSaturatedHost,
    SingleProcessLoading,
    LoaderStarvesStep,
    DeviceIdleWhileLoading,
    PageableCopies,
    ExposedCommunication,
    LowOverlap,
    Straggler,
    OversubscribedThreads,  # why the operators are slow, before what they do: it leads the device time's group on a tie
    HandAttention,
    Fp32Gemms,
    SaturatedDevice,
    CpuFp32Matmul,
    NotCompiled,
    CudnnBenchmarkOff,
    DeviceDominates,
    LaunchBound,
    FrequentSyncs,
    HostBound,
    LossPlateau,
)


def rule_by_id(rule_id: str) -> type[Rule]:
    for r in RULES:
        if r.id == rule_id:
            return r
    raise KeyError(f"no rule {rule_id!r}; known: {', '.join(r.id for r in RULES)}")


def rules_docs() -> list[dict]:
    """Every rule as documentation (id, name, class, docstring, thresholds, fix, example labels): the
    dashboard's Rules page is built from this, so the docs and the tests come from the same classes."""
    return [r.doc() for r in RULES]


__all__ = ["RULES", "Example", "Rule", "rule_by_id", "rules_docs"]
