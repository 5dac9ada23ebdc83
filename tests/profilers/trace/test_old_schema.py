"""Old Kineto schemas (PyTorch 1.8: capitalised ``Operator``/``Runtime``/``Kernel``/``Memcpy``/``Memset``/``Python``
categories, record_function ranges as operators) read exactly like the current schema: the same steps, the same
breakdown, the same DataLoader spans, the same diagnosis."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from advisors.diagnosis import diagnose
from advisors.observation import observe
from profilers.trace.load import load_trace
from profilers.trace.events import kind_of
from tests.trace_factory import write, x

STEP_US = 10_000.0
CURRENT = {
    "step": "user_annotation",
    "loader": "user_annotation",
    "op": "cpu_op",
    "python": "python_function",
    "runtime": "cuda_runtime",
    "kernel": "kernel",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}
OLD = {
    "step": "Operator",
    "loader": "Operator",
    "op": "Operator",
    "python": "Python",
    "runtime": "Runtime",
    "kernel": "Kernel",
    "memcpy": "Memcpy",
    "memset": "Memset",
}


def _trace(cat: dict[str, str]) -> list[dict]:
    """Three GPU steps that wait ~45% of the time for a single-process DataLoader, then compute."""
    ev: list[dict] = []
    gpu = {"pid": 0, "tid": 7}
    for i in range(3):
        t = i * STEP_US
        ev.append(x(f"ProfilerStep#{i}", t, STEP_US, cat=cat["step"]))
        ev.append(
            x(
                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                t + 20,
                4_500,
                cat=cat["loader"],
            )
        )
        ev.append(
            x("torch/utils/data/dataloader.py(628): __next__", t + 30, 4_400, cat=cat["python"])
        )
        ev.append(x("aten::copy_", t + 4_600, 200, cat=cat["op"]))
        ev.append(x("cudaMemcpyAsync", t + 4_610, 20, cat=cat["runtime"], correlation=100 + i))
        ev.append(
            x(
                "Memcpy HtoD (Pageable -> Device)",
                t + 4_640,
                100,
                cat=cat["memcpy"],
                device=0,
                stream=7,
                correlation=100 + i,
                **gpu,
            )
        )
        ev.append(x("aten::conv2d", t + 4_900, 4_800, cat=cat["op"]))
        ev.append(x("cudaLaunchKernel", t + 4_910, 10, cat=cat["runtime"], correlation=200 + i))
        ev.append(
            x(
                "volta_scudnn_128x64_relu_interior_nn_v1",
                t + 5_000,
                4_500,
                cat=cat["kernel"],
                device=0,
                stream=7,
                correlation=200 + i,
                **gpu,
            )
        )
        ev.append(x("cudaMemsetAsync", t + 9_720, 5, cat=cat["runtime"], correlation=300 + i))
        ev.append(
            x(
                "Memset (Device)",
                t + 9_600,
                50,
                cat=cat["memset"],
                device=0,
                stream=7,
                correlation=300 + i,
                **gpu,
            )
        )
    return ev


@pytest.fixture
def both(tmp_path: Path) -> tuple[Path, Path]:
    return (
        write(tmp_path / "current.pt.trace.json", _trace(CURRENT)),
        write(tmp_path / "old.pt.trace.json", _trace(OLD)),
    )


@pytest.mark.parametrize(
    ("cat", "kind"),
    [
        ("Operator", "cpu_op"),
        ("Runtime", "runtime"),
        ("Kernel", "kernel"),
        ("Memcpy", "memcpy"),
        ("Memset", "memset"),
        ("Python", "python_function"),
        ("User Annotation", "user_annotation"),
        ("GPU Memcpy", "memcpy"),
    ],
)
def test_capitalised_categories_normalise(cat: str, kind: str) -> None:
    assert kind_of(cat) == kind and kind_of(cat.lower()) == kind


def test_old_schema_reads_exactly_like_the_current_one(both: tuple[Path, Path]) -> None:
    current, old = (observe(p) for p in both)
    assert current.breakdown is not None and old.breakdown is not None
    pd.testing.assert_frame_equal(current.breakdown.per_step, old.breakdown.per_step)
    assert current.breakdown.shares()["dataloader"] == pytest.approx(0.45, abs=0.01)
    assert (
        current.loader == old.loader
        and old.loader is not None
        and old.loader.mode == "single_process"
    )
    events = [load_trace(p).events for p in both]
    assert [sorted(e["kind"].astype(str).unique()) for e in events][0] == sorted(
        events[1]["kind"].astype(str).unique()
    ) + ["user_annotation"]  # old 1.8: ranges were operators


def test_old_schema_dataloader_reaches_the_data_rules(both: tuple[Path, Path]) -> None:
    current, old = (diagnose(observe(p)) for p in both)
    assert old.bottleneck.value == "data" == current.bottleneck.value
    assert [(f.rule, f.severity, f.fix_id) for f in old.findings] == [
        (f.rule, f.severity, f.fix_id) for f in current.findings
    ]
    assert old.binding is not None and old.binding.evidence["dataloader_exposed_share"] > 0.4
