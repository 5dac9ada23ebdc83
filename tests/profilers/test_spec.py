"""TrainingSpec: validation, patching, --set coercion, serialisation round-trips, diffs."""

from __future__ import annotations

import dataclasses
import pickle
import re
from typing import get_args

import pytest

from profilers.errors import SpecError
from profilers.run.spec import CompileMode, TrainingSpec


def spec(**kw: object) -> TrainingSpec:
    return TrainingSpec(workload="digits", **kw)  # type: ignore[arg-type]


def test_defaults_match_the_contract() -> None:
    s = spec()
    assert (s.batch_size, s.steps, s.epochs, s.warmup_steps, s.seed, s.device) == (32, 20, None, 3, 0, "auto")
    assert (s.precision, s.grad_accum_steps, s.optimizer, s.lr, s.bucket_cap_mb) == ("fp32", 1, "sgd", 0.01, 25.0)
    assert (s.profile_wait, s.profile_warmup, s.profile_active, s.profile_memory) == (1, 1, 3, True)
    assert dict(s.params) == {}


@pytest.mark.parametrize("bad, words", [
    ({"batch_size": 0}, "batch_size must be at least 1"),
    ({"batch_size": 30, "grad_accum_steps": 4}, "not divisible"),
    ({"precision": "int8"}, "precision='int8' is not a valid one of"),
    ({"device": "tpu"}, "device"),
    ({"persistent_workers": True}, "needs num_workers > 0"),
    ({"prefetch_factor": 2}, "needs num_workers > 0"),
    ({"epochs": 0}, "epochs must be at least 1"),
    ({"lr": -1.0}, "lr must be positive"),
    ({"batch_size": 8.5}, "batch_size=8.5"),
    ({"compile": 1}, "compile=1"),
    ({"memory_budget_mb": 0}, "memory_budget_mb"),
    ({"nnodes": 2, "world_size": 2}, "rdzv_endpoint"),
    ({"world_size": 3, "nnodes": 2, "rdzv_endpoint": "h:1"}, "not a multiple"),
    ({"backend": "nccl", "device": "cpu"}, "nccl"),
    ({"params": [1, 2]}, "params must be a mapping"),
    ({"compile_mode": "bogus"}, "compile_mode='bogus' is not a valid one of 'default', 'reduce-overhead'"),
    ({"lr": float("nan")}, "lr=nan is not a valid float"),  # NaN passes `lr <= 0`: refused by type
    ({"bucket_cap_mb": float("inf")}, "bucket_cap_mb=inf"),
    ({"lr": "1e-3"}, "lr='1e-3' is not a valid float"),  # text becomes a number only when read from a file
])
def test_invalid_specs_raise_spec_error_with_a_clear_message(bad: dict, words: str) -> None:
    with pytest.raises(SpecError, match=words.replace("(", r"\(")):
        spec(**bad)


def test_patch_returns_a_new_validated_spec_and_merges_params() -> None:
    base = spec(params={"size": "tiny", "width": 8})
    fixed = base.patch(batch_size=64, params={"size": "bench"})
    assert fixed.batch_size == 64 and dict(fixed.params) == {"size": "bench", "width": 8}
    assert base.batch_size == 32 and dict(base.params) == {"size": "tiny", "width": 8}
    with pytest.raises(SpecError, match="unknown spec field"):
        base.patch(batchsize=64)
    with pytest.raises(SpecError, match="not divisible"):
        base.patch(grad_accum_steps=5)


def test_spec_is_frozen_including_params() -> None:
    s = spec(params={"size": "tiny"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batch_size = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.params["size"] = "bench"  # type: ignore[index]


def test_with_sets_coerces_by_field_type() -> None:
    s = spec().with_sets(["batch_size=64", "lr=3e-4", "compile=true", "epochs=null", "prefetch_factor=4",
                          "num_workers=2", "precision=bf16", "params.size=bench", "params.width=32",
                          "memory_budget_mb=none", "bucket_cap_mb=50"])
    assert (s.batch_size, s.lr, s.compile, s.epochs, s.prefetch_factor, s.precision) == (64, 3e-4, True, None, 4,
                                                                                      "bf16")
    assert s.bucket_cap_mb == 50.0 and isinstance(s.bucket_cap_mb, float)
    assert dict(s.params) == {"size": "bench", "width": 32}
    for bad in (["batch_size=many"], ["compile=maybe"], ["nosuch=1"], ["batch_size"], ["precision=int8"]):
        with pytest.raises(SpecError):
            spec().with_sets(bad)


def test_round_trips_json_yaml_dict_and_pickle() -> None:
    s = spec(params={"size": "bench", "limit": None}, precision="bf16", epochs=2, memory_budget_mb=900)
    assert TrainingSpec.from_json(s.to_json()) == s
    assert TrainingSpec.from_yaml(s.to_yaml()) == s
    assert TrainingSpec.from_dict(s.to_dict()) == s
    assert pickle.loads(pickle.dumps(s)) == s
    assert hash(s) == hash(TrainingSpec.from_json(s.to_json()))


def test_from_text_rejects_garbage_and_unknown_fields() -> None:
    with pytest.raises(SpecError, match="not valid JSON"):
        TrainingSpec.from_json("{")
    with pytest.raises(SpecError, match="unknown spec field"):
        TrainingSpec.from_json('{"workload": "x", "turbo": true}')
    with pytest.raises(SpecError, match="needs a 'workload'"):
        TrainingSpec.from_yaml("batch_size: 3")
    with pytest.raises(SpecError, match="must be a mapping"):
        TrainingSpec.from_yaml("- 1")


def test_compile_modes_are_exactly_those_torch_compile_accepts() -> None:
    import torch._inductor

    assert set(get_args(CompileMode)) == set(torch._inductor.list_mode_options())
    assert spec(compile_mode="max-autotune-no-cudagraphs").compile_mode == "max-autotune-no-cudagraphs"
    with pytest.raises(SpecError, match="compile_mode='max_autotune'"):
        spec().with_sets(["compile_mode=max_autotune"])


def test_hand_written_yaml_floats_are_read_as_numbers() -> None:
    """YAML 1.1 (PyYAML) reads ``1e-3`` as a string; a float field takes it, other fields and junk do not."""
    s = TrainingSpec.from_yaml("workload: digits\nlr: 1e-3\nbucket_cap_mb: 5E+1\nstep_timeout_s: '.5'\n")
    assert (s.lr, s.bucket_cap_mb, s.step_timeout_s) == (1e-3, 50.0, 0.5) and isinstance(s.lr, float)
    assert TrainingSpec.from_dict({"workload": "digits", "lr": " 2e-4 "}).lr == 2e-4
    assert TrainingSpec.from_json('{"workload": "digits", "lr": "3e-4"}').lr == 3e-4
    for line, words in [("lr: fast", "lr='fast' is not a valid float (write a number"),
                        ("lr: 1e-3x", "lr='1e-3x' is not a valid float"),
                        ("lr: nan", "lr='nan' is not a valid float"),
                        ("lr: .nan", "lr=nan is not a valid float"),
                        ("lr: -1e-3", "lr must be positive"),
                        ("step_timeout_s: soon", "step_timeout_s='soon' is not a valid float or null"),
                        ("batch_size: '8'", "batch_size='8' is not a valid int"),
                        ("compile_mode: '1e3'", "compile_mode='1e3' is not a valid one of")]:
        with pytest.raises(SpecError, match=re.escape(words)):
            TrainingSpec.from_yaml(f"workload: digits\n{line}\n")


def test_describe_diff_lists_changed_fields_and_params() -> None:
    a = spec(params={"size": "tiny"})
    b = a.patch(precision="bf16", num_workers=2, params={"size": "bench", "width": 4})
    assert a.describe_diff(b) == {"num_workers": (0, 2), "precision": ("fp32", "bf16"),
                                  "params.size": ("tiny", "bench"), "params.width": (None, 4)}
    assert a.describe_diff(a) == {}
