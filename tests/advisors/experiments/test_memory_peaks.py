"""A memory fix's round says each arm's peaks in numbers: the profiler's peak of live tensors
(its trace's ``[memory]`` events) and the run's own, beside the step time it cost."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

from advisors.experiments.results.memory_peaks import MemoryRecord, live_peak, memory_record
from advisors.experiments.results.record import ExperimentRecord


def _run(tmp_path: Path, name: str, width: int) -> str:
    """A run folder whose trace holds two profiled steps that keep ``width``² floats alive."""
    run = tmp_path / name
    (run / "tb").mkdir(parents=True)
    cpu = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=cpu, profile_memory=True) as prof:
        for _ in range(2):
            with torch.profiler.record_function("ProfilerStep#0"):
                x = torch.ones(width, width)
                y = (x * 2).sum()
                del x, y
    prof.export_chrome_trace(str(run / "tb" / "rank0.1.pt.trace.json.gz"))
    return str(run)


def _arm(*run_dirs: str, peak: float) -> SimpleNamespace:
    return SimpleNamespace(
        outcomes=[SimpleNamespace(run_dir=d) for d in run_dirs], peak_memory_mb=peak
    )


def test_each_arm_reads_its_largest_live_peak_and_says_the_cost(tmp_path: Path) -> None:
    wide, narrow = _run(tmp_path, "a", 1024), _run(tmp_path, "b", 256)
    mb, on_device = live_peak(wide)
    assert mb is not None and mb >= 4.0 and not on_device  # 1024² fp32 = 4 MB live at once
    rec = memory_record(_arm(wide, narrow, peak=900.0), _arm(narrow, peak=700.0))
    assert rec.basis == "host tensors" and rec.before_allocated_mb == mb
    assert rec.after_allocated_mb is not None and rec.after_allocated_mb < mb
    assert rec.allocated_change is not None and rec.allocated_change < -0.5
    said = rec.text(120.0, 150.0)
    assert said.startswith(f"live host tensors {mb:.0f} → {rec.after_allocated_mb:.0f} MB (-")
    assert said.endswith("; run peak 900 → 700 MB; step 120.0 → 150.0 ms (+25%)")


def test_no_trace_no_live_peak(tmp_path: Path) -> None:
    assert live_peak(str(tmp_path)) == (None, False)
    rec = memory_record(_arm(str(tmp_path), peak=10.0), _arm(peak=8.0))
    assert rec.before_allocated_mb is None and rec.text(None, None) == "run peak 10 → 8 MB"


def test_the_record_keeps_it_through_json() -> None:
    mem = MemoryRecord(600.0, 200.0, 900.0, 700.0, "host tensors")
    rec = ExperimentRecord(
        "ladder round", "activation_checkpointing", "t", "memory", "kept", "", ""
    )
    stored = {**rec.to_json(), "memory": mem.to_json()}
    assert stored["memory"]["peak_allocated_change"] == round(200 / 600 - 1, 4)
    back = ExperimentRecord.from_json(stored)
    assert back.memory == mem and back.to_json()["memory"] == mem.to_json()
    assert ExperimentRecord.from_json(rec.to_json()).memory is None


def test_a_stored_ladder_keeps_its_rounds_memory() -> None:
    """A ladder's rounds read back with their peaks, also from a view stored with the record's
    field names."""
    from dataclasses import asdict

    from advisors.experiments.results.record import LadderRecord
    from advisors.experiments.results.stored_view import ladder_view, read_view

    mem = MemoryRecord(600.0, 200.0, 900.0, 700.0, "host tensors")
    rung = ExperimentRecord(
        "ladder round", "activation_checkpointing", "t", "memory", "kept", "", "", memory=mem
    )
    lad = LadderRecord(
        rounds=(rung,), total_speedup=0.8, rounds_asked=1, why_stopped="", complete=True
    )
    back = read_view(ladder_view(lad))
    assert back is not None and back.ladder is not None
    assert back.ladder.rounds[0].memory == mem
    assert MemoryRecord.from_json(asdict(mem)) == mem
