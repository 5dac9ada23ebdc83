"""A binding finding holds a real share of the step: a loader at 8% does not bind a step whose forward and backward
hold 68% — the verdict is compute (COMP007, the device's own work), the loader a minor finding; a real finding
(a loader at 34%) still binds as before, and the fallback never shows where it does not bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisors.diagnosis import diagnose, diagnosis_json
from advisors.observation import observe
from advisors.rules.base import MIN_BINDING_SHARE
from advisors.synthetic import observation
from advisors.verdict import Bottleneck

SHARED = Path(__file__).resolve().parents[4] / "shared" / "traces"
H100 = Path(__file__).resolve().parents[2] / "fixtures" / "h100"
SINGLE = {"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.08}


def test_a_cached_cpu_step_whose_operators_hold_68_percent_is_compute_with_data_minor() -> None:
    """The launched data_bound run with caching on read "data — … (8% of the step) (confidence 62%)"."""
    d = diagnose(
        observation(
            {"forward": 0.3, "backward": 0.38, "dataloader": 0.08}, device="cpu", ops=SINGLE
        )
    )
    assert (
        d.bottleneck is Bottleneck.COMPUTE and d.binding is not None and d.binding.rule == "COMP007"
    )
    assert d.binding.evidence["device_work_share"] == pytest.approx(0.68, abs=1e-3)
    minor = [f for f in d.others if f.bottleneck is Bottleneck.DATA]
    assert [f.rule for f in minor] == ["DATA003"] and minor[0].severity == pytest.approx(
        0.08, abs=1e-3
    )
    order = [x["fix"] for x in diagnosis_json(d)["ranking"]["fix_order"]]
    assert order == ["torch_compile", "dataloader_workers"]
    # honest: not as sure as a saturated device (80% in operators), nor above the unsaturated ceiling
    saturated = diagnose(
        observation(
            {"forward": 0.4, "backward": 0.42, "dataloader": 0.08}, device="cpu", ops=SINGLE
        )
    )
    assert saturated.binding is not None and saturated.binding.rule == "COMP002"
    assert d.confidence < saturated.confidence and d.confidence <= 0.55


def test_a_real_share_still_binds_and_the_fallback_stays_out_of_it() -> None:
    d = diagnose(
        observation(
            {"gpu_compute": 0.56, "dataloader": 0.34},
            ops={"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__": 0.35},
        )
    )
    assert d.bottleneck is Bottleneck.DATA and d.binding.severity >= MIN_BINDING_SHARE
    assert all(f.rule != "COMP007" for f in d.findings)
    real = diagnose(observe(SHARED / "data" / "kineto_resnet50_num_workers_0.pt.trace.json.gz"))
    assert real.bottleneck is Bottleneck.DATA and all(f.rule != "COMP007" for f in real.findings)


def test_the_h100_tf32_run_is_compute_with_its_loader_a_minor_finding() -> None:
    """GPU busy 78% in TF32 GEMMs; in-process loading 9% of the step: was 'data (53%)'."""
    d = diagnose(observe(H100 / "compute_tf32"))
    assert (
        d.bottleneck is Bottleneck.COMPUTE and d.binding is not None and d.binding.rule == "COMP007"
    )
    assert d.binding.fix_id == "torch_compile" and "tf32" not in {f.fix_id for f in d.findings}
    data = next(f for f in d.others if f.rule == "DATA003")
    assert data.severity < MIN_BINDING_SHARE
