"""The training script's command line: one table of flags, a size's defaults, ``--set`` strings, and the command
built from settings (only what differs from the size, checked by the script's own parser first)."""

from __future__ import annotations

import pytest

from sample_runs import WORKLOADS, WorkloadError, options
from sample_runs.train import parse_args


def test_a_size_sets_the_flags_defaults_and_the_command_line_wins() -> None:
    args = parse_args(["compute_bound"])
    assert (args.batch_size, args.steps, args.lr, args.num_workers) == (128, 10, 0.01, 0)
    args = parse_args(
        ["compute_bound", "--size", "bench", "--batch-size", "64", "--set-param", "width=32"]
    )
    assert (args.batch_size, args.steps, args.params) == (64, 40, {"width": 32})
    assert parse_args(["gpt_small"]).optimizer == "adamw"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["compute_bound", "--grad-accum-steps", "3"], "not divisible by grad_accum_steps=3"),
        (["digits", "--persistent-workers"], "persistent_workers needs num_workers > 0"),
        (["digits", "--prefetch-factor", "2"], "prefetch_factor needs num_workers > 0"),
        (["digits", "--lr", "0"], "lr must be positive"),
        (["digits", "--device", "cpu", "--backend", "nccl"], "backend nccl needs CUDA"),
        (["digits", "--set-param", "widht=3"], "has no parameter(s) ['widht']"),
        (["digits", "--size", "huge"], "has no size 'huge'"),
        (["nope"], "unknown workload 'nope'"),
        (["digits", "--precision", "fp8"], "invalid choice: 'fp8'"),
    ],
)
def test_a_bad_command_line_exits_2_with_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_sets_are_typed_by_their_flag_and_params_by_their_text() -> None:
    values, params = options.parse_sets(
        [
            "num_workers=2",
            "pin_memory=true",
            "prefetch_factor=null",
            "lr=1e-3",
            "memory_budget_mb=900",
            "params.images=128",
            "params.blur=0.5",
            "params.name=x",
        ]
    )
    assert values == {
        "num_workers": 2,
        "pin_memory": True,
        "prefetch_factor": None,
        "lr": 0.001,
        "memory_budget_mb": 900,
    }
    assert params == {"images": 128, "blur": 0.5, "name": "x"}
    with pytest.raises(WorkloadError, match="unknown setting 'bogus'"):
        options.parse_sets(["bogus=1"])
    with pytest.raises(WorkloadError, match="num_workers='two': expected an integer"):
        options.parse_sets(["num_workers=two"])
    with pytest.raises(WorkloadError, match="expects KEY=VALUE"):
        options.parse_sets(["num_workers"])


def test_the_command_holds_only_what_differs_from_the_size_and_parses_back() -> None:
    argv = options.command(
        "data_bound",
        "tiny",
        {"num_workers": 2, "pin_memory": True, "batch_size": 16, "memory_budget_mb": 900},
        {"images": 128},
    )
    assert argv == ["data_bound", "--num-workers", "2", "--pin-memory", "--set-param", "images=128"]
    args = parse_args(argv)
    assert (args.num_workers, args.pin_memory, args.batch_size, args.params) == (
        2,
        True,
        16,
        {"images": 128},
    )
    assert options.command("compute_bound", "bench") == ["compute_bound", "--size", "bench"]
    with pytest.raises(WorkloadError, match="persistent_workers needs num_workers > 0"):
        options.command("digits", "tiny", {"persistent_workers": True})
    with pytest.raises(WorkloadError, match="has no parameter"):
        options.command("digits", "tiny", {}, {"widht": 1})
    assert options.launch_settings("memory_bound")["memory_budget_mb"] == 1500
    assert (
        options.launch_settings("communication_bound", values={"world_size": 4})["world_size"] == 4
    )


def test_every_flag_has_a_valid_default_and_the_choices_torch_accepts() -> None:
    import torch._inductor

    assert set(options.COMPILE_MODES) == set(torch._inductor.list_mode_options())
    for name in WORKLOADS:
        for size in WORKLOADS[name].sizes:
            assert options.check(options.defaults(name, size)) is None, (name, size)
            unknown = (
                set(WORKLOADS[name].settings(size))
                - set(options.BY_NAME)
                - set(options.LAUNCH_BY_NAME)
            )
            assert not unknown, (name, size, unknown)
    assert {f.name for f in options.FLAGS} & {f.name for f in options.LAUNCH} == set()
