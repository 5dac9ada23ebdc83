"""Every labelled real trace in ../shared/traces gets its folder's class, with evidence (see its MANIFEST)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisors.diagnosis import diagnose
from advisors.observation import observe

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
LABELS = ("data", "compute", "memory", "communication", "host")


def _labelled() -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for label in LABELS:
        folder = TRACES / label
        for p in sorted(folder.glob("*")) if folder.is_dir() else []:
            out.append((p, label))  # traces, folders of ranks, and memory snapshot pickles alike
            if p.is_dir():
                out.extend((f, label) for f in sorted(p.glob("*.json*")))
    return out


CASES = _labelled()
# CI always has ../shared beside the checkout: no cases is a failure at collection, never a skip.
assert CASES, "expected the labelled real traces in ../shared/traces beside the checkout"


@pytest.mark.parametrize(
    ("path", "label"), CASES, ids=[str(p.relative_to(TRACES)) for p, _ in CASES]
)
def test_labelled_trace_gets_its_class(path: Path, label: str) -> None:
    obs = observe(path)
    if (
        obs.snapshot is not None
    ):  # no device size: the peak is stated, nothing binds (issue 33); on a device
        # its reservation fills to 95%, the label's class binds
        assert diagnose(obs).binding is None
        obs = observe(path, device_memory_bytes=int(obs.snapshot.reserved_bytes / 0.95))
    d = diagnose(obs)
    assert d.bottleneck.value == label, [(f.rule, f.severity) for f in d.findings]
    assert d.binding is not None and d.binding.evidence
    assert 0.3 <= d.confidence <= 1.0
    assert d.binding.fix_id is not None or d.binding.rule == "COMM003"


def test_data_compute_pair_moves_from_loader_to_gemms() -> None:
    before = diagnose(observe(TRACES / "data" / "kineto_resnet50_num_workers_0.pt.trace.json.gz"))
    after = diagnose(observe(TRACES / "compute" / "kineto_resnet50_num_workers_4.pt.trace.json.gz"))
    assert before.binding and before.binding.evidence["dataloader_exposed_share"] > 0.3
    assert after.binding and after.binding.rule == "COMP001"
    assert after.binding.evidence["gemm_low_precision_share"] == 0.0


def test_partly_on_mixed_precision_is_not_reported_as_off() -> None:
    d = diagnose(
        observe(TRACES / "data" / "tracelens_h100_owlv2.json.gz")
    )  # bf16 GEMMs, fp32 softmax
    assert "COMP001" not in {f.rule for f in d.findings}


@pytest.mark.parametrize(
    "name", ["hta_cpu_only_gloo_rank-34.pt.trace.json.gz", "hta_no_rank_info.json.gz"]
)
def test_cpu_only_traces_say_what_they_cannot_judge(name: str) -> None:
    d = diagnose(observe(TRACES / "edge" / name))
    host = [n for n in d.notes if n.bottleneck.value == "host"]
    assert host and all(n.whole_class for n in host)


def test_single_process_loader_recorded_as_annotation_is_recognised() -> None:
    # owlv2 records enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ as a user_annotation
    d = diagnose(observe(TRACES / "data" / "tracelens_h100_owlv2.json.gz"))
    rules = {
        m.rule: m for f in d.findings for m in (f, *f.related)
    }  # the loader rules are one finding
    assert rules["DATA003"].evidence["loader_mode"] == "single_process"
    assert rules["DATA002"].evidence["idle_fraction_of_loader_time"] > 0.9


def test_snapshot_is_judged_against_the_device_total_when_stated() -> None:
    snap = TRACES / "memory" / "cs336_memory_snapshot.pickle"
    unknown = diagnose(
        observe(snap)
    )  # no device size: the peak stated and the device asked for, never binding
    assert unknown.binding is None
    assert any(
        n.bottleneck.value == "memory" and "12.97 GiB" in n.reason and "device's size" in n.reason
        for n in unknown.notes
    )
    small = diagnose(
        observe(snap, device_memory_bytes=14 * 1024**3)
    )  # 13.2 GiB reserved of 14: 94%
    assert small.bottleneck.value == "memory" and small.binding is not None
    assert 0.9 < small.binding.evidence["share_of_device"] < 0.95
    assert small.binding.evidence["top_site"] == "model.py:39 forward"
    big = diagnose(observe(snap, device_memory_bytes=80 * 1024**3))
    assert big.bottleneck.value == "none" and big.binding is None
    assert any(
        n.bottleneck.value == "data" and n.whole_class for n in big.notes
    )  # no timing: said, not guessed
