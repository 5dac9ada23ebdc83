"""Attribution on small hand-written traces whose answer is known to the microsecond."""

from __future__ import annotations

from pathlib import Path

import pytest

from profilers.trace.breakdown import CATEGORIES, breakdown
from profilers.trace.load import load_trace
from tests.trace_factory import kernel, memory, step, write, x


def shares_us(path: Path) -> dict[str, float]:
    b = breakdown(load_trace(path))
    return {c: v / 1000 for c, v in b.category_ns().items()}


def test_gpu_step_priority_and_exposed_communication(tmp_path: Path):
    events = [
        step(1, 0, 100),
        x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 30),
        x("cudaLaunchKernel", 25, 10, cat="cuda_runtime", correlation=5),
        kernel("volta_sgemm_128x64_nn", 30, 40, correlation=5),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60, 30, stream=9),
        x("aten::mm", 90, 5),
        x(
            "ProfilerStep#1", 0, 100, cat="gpu_user_annotation", tid=7, pid=0
        ),  # GPU copy: not a step
    ]
    got = shares_us(write(tmp_path / "t.json", events))
    assert got == pytest.approx(
        {
            "gpu_compute": 40,
            "gpu_memcpy": 0,
            "gpu_memset": 0,
            "communication": 20,
            "dataloader": 30,
            "host_runtime": 0,
            "optimizer": 0,
            "backward": 0,
            "forward": 5,
            "other": 5,
        }
    )
    b = breakdown(load_trace(tmp_path / "t.json"))
    assert b.n_steps == 1 and b.comm_total_ns == 30_000 and b.comm_overlapped_ns == 10_000
    assert b.gpu_busy_ns == 60_000  # union of compute and communication kernels
    assert b.kernel_class_ns["matmul"] == 40_000 and b.kernel_class_ns["communication"] == 30_000


def test_every_step_sums_exactly_to_step_time(tmp_path: Path):
    events = [
        step(1, 0, 50),
        step(2, 50, 70),
        kernel("elementwise_kernel", 10, 80),
        x("aten::add", 5, 100),
    ]
    b = breakdown(load_trace(write(tmp_path / "t.json", events)))
    per = b.per_step
    assert per[list(CATEGORIES)].sum(axis=1).tolist() == per["step_ns"].tolist() == [50_000, 70_000]
    assert sum(b.shares().values()) == pytest.approx(1.0)
    assert per["gpu_compute"].tolist() == [
        40_000,
        40_000,
    ]  # kernel 10..90 over steps 0..50, 50..120


def test_cpu_only_rank_exposes_collective_waits(tmp_path: Path):
    events = [
        step(1, 0, 100),
        x("aten::addmm", 5, 15),
        x("## backward ##", 20, 75, cat="user_annotation"),
        x("autograd::engine::evaluate_function: AddmmBackward0", 20, 20),
        x("gloo:all_reduce", 20, 70, cat="user_annotation", tid=2),
        x("Optimizer.step#SGD.step", 95, 5),
    ]
    b = breakdown(load_trace(write(tmp_path / "cpu.json", events)))
    assert b.device == "cpu"
    got = {c: v / 1000 for c, v in b.category_ns().items() if v}
    assert got == {"forward": 15, "backward": 25, "communication": 50, "optimizer": 5, "other": 5}
    assert b.comm_total_ns == 70_000 and b.comm_overlapped_ns == 20_000


def test_no_step_markers_is_one_step_and_said(tmp_path: Path):
    tr = load_trace(write(tmp_path / "t.json", [x("aten::mm", 10, 20), x("aten::add", 40, 10)]))
    assert tr.steps_inferred and len(tr.steps) == 1
    assert any("ProfilerStep" in w for w in tr.warnings)
    b = breakdown(tr)
    assert b.step_time_ms == pytest.approx(0.040) and b.category_ns()["forward"] == 30_000


def test_multi_rank_steps_counted_once_and_the_busiest_rank_named(tmp_path: Path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, work in ((0, 20), (1, 60), (2, 25)):
        events = [
            step(7, 0, 100),
            kernel("sgemm", 0, work),
            kernel("ncclKernel_AllReduce", work, 100 - work, 9),
        ]
        write(
            folder / f"rank{rank}.pt.trace.json",
            events,
            distributedInfo={"rank": rank, "world_size": 3},
        )
    b = breakdown(load_trace(folder))
    assert b.ranks == (0, 1, 2) and b.n_steps == 1
    call = (
        b.straggler_call
    )  # one step of three ranks: no noise to judge rank 1's lead by, so it is not marked
    assert (
        call.rank == 1
        and b.straggler is None
        and "can be measured: no rank is marked" in call.reason
    )
    assert b.per_rank.set_index("rank")["exposed_comm_ms"].to_dict() == pytest.approx(
        {0: 0.08, 1: 0.04, 2: 0.075}
    )


def test_memory_peak_syncs_and_launch_links(tmp_path: Path):
    events = [
        step(3, 0, 100),
        memory(10, allocated=6 * 2**30, reserved=7 * 2**30),
        memory(20, allocated=2**30, reserved=7 * 2**30),
        x("cudaStreamSynchronize", 50, 5, cat="cuda_runtime"),
        x("aten::item", 60, 3),
        x("aten::_local_scalar_dense", 60, 2),
        x("cudaLaunchKernel", 70, 2, cat="cuda_runtime", correlation=42),
        kernel(
            "vectorized_elementwise_kernel", 120, 5, correlation=42
        ),  # runs after the CPU step ended
    ]
    path = write(
        tmp_path / "t.json",
        events,
        deviceProperties=[{"id": 0, "name": "Fake GPU", "totalGlobalMem": 8 * 2**30}],
    )
    tr = load_trace(path)
    assert (
        int(tr.events.loc[tr.events["name"] == "vectorized_elementwise_kernel", "step"].iloc[0])
        == 3
    )
    b = breakdown(tr)
    assert b.memory.device_peak_share == pytest.approx(7 / 8)
    assert b.syncs.stream_sync == 1 and b.syncs.item == 1
    assert b.device_name == "Fake GPU"


def test_cpu_collective_ops_are_communication_not_forward(tmp_path: Path):
    """A c10d::barrier on the main thread (inside the optimizer step, with an op of its own nested in it) is
    communication; only work on another thread hides part of it, and it never overlaps itself."""
    events = [
        step(1, 0, 100),
        x("aten::addmm", 5, 20),
        x("aten::broadcast_tensors", 25, 2),  # shape arithmetic, not a collective
        x("Optimizer.step#SGD.step", 28, 67, cat="user_annotation"),
        x("c10d::barrier", 30, 60),
        x("aten::empty", 40, 1),  # inside the barrier, on its thread: part of the collective
        x("aten::mul", 80, 10, tid=2),  # work on another thread hides 10 µs of the barrier
    ]
    b = breakdown(load_trace(write(tmp_path / "cpu.json", events)))
    assert b.device == "cpu"
    got = {c: v / 1000 for c, v in b.category_ns().items() if v}
    assert got == {"communication": 50, "forward": 32, "optimizer": 7, "other": 11}
    assert b.comm_total_ns == 60_000 and b.comm_overlapped_ns == 10_000


def test_lone_cpu_barrier_is_exposed_communication(tmp_path: Path):
    events = [step(1, 0, 100), x("aten::addmm", 0, 20), x("c10d::barrier", 20, 60)]
    b = breakdown(load_trace(write(tmp_path / "cpu.json", events)))
    assert {c: v / 1000 for c, v in b.category_ns().items() if v} == {
        "forward": 20,
        "communication": 60,
        "other": 20,
    }
    assert b.comm_total_ns == 60_000 and b.comm_overlapped_ns == 0


def test_gpu_rank_host_collective_op_is_not_forward(tmp_path: Path):
    """On a GPU rank communication is the collective kernels; the host's record_param_comms while the device
    idles is not forward work (it is left to other)."""
    events = [
        step(1, 0, 100),
        x("aten::mm", 0, 20),
        kernel("sgemm", 0, 20),
        x("record_param_comms", 20, 30),
        kernel("ncclKernel_AllReduce", 50, 40, stream=9),
    ]
    b = breakdown(load_trace(write(tmp_path / "gpu.json", events)))
    got = {c: v / 1000 for c, v in b.category_ns().items() if v}
    assert got == {"gpu_compute": 20, "communication": 40, "other": 40}


def test_device_synchronize_counted_per_step(tmp_path: Path):
    """cudaDeviceSynchronize / hipDeviceSynchronize inside steps, averaged over (rank, step) rows; one outside
    every step and the stream/event kinds are not device syncs."""
    events = [
        step(1, 0, 100),
        step(2, 100, 100),
        x("cudaDeviceSynchronize", 10, 5, cat="cuda_runtime"),
        x("cudaDeviceSynchronize", 40, 5, cat="cuda_runtime"),
        x("hipDeviceSynchronize", 150, 5, cat="hip_runtime"),
        x("cudaDeviceSynchronize", 250, 5, cat="cuda_runtime"),  # after the last step
        x("cudaStreamSynchronize", 60, 5, cat="cuda_runtime"),
        x("cudaEventSynchronize", 160, 5, cat="cuda_runtime"),
        x("cudaDeviceSynchronize", 170, 5),  # a cpu_op of that name is not the runtime call
        kernel("sgemm", 20, 10),
    ]
    syncs = breakdown(load_trace(write(tmp_path / "t.json", events))).syncs
    assert syncs.device_sync == 1.5  # 3 calls over 2 steps
    assert syncs.stream_sync == 0.5 and syncs.event_sync == 0.5
    assert syncs.total_syncs == 2.5


def test_per_rank_columns_are_what_is_documented(tmp_path: Path):
    from profilers.trace.breakdown_parts import RANK_COLUMNS, rank_table

    b = breakdown(load_trace(write(tmp_path / "t.json", [step(1, 0, 100), x("aten::mm", 0, 10)])))
    assert list(b.per_rank.columns) == RANK_COLUMNS == list(rank_table(b.per_step.iloc[:0]).columns)
