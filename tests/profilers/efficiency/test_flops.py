"""The torch-free FLOP formulas agree with ``torch.utils.flop_counter`` (run in the user environment, which has
torch), and a hand-made trace's counted ops are the innermost ones, each counted once."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from profilers.efficiency import flops as fl
from tests import trace_factory as tf

_TORCH_SIDE = r"""
import json, sys
import torch.utils.flop_counter as fc
out = []
for kind, args in json.load(sys.stdin):
    if kind == "conv_backward":
        g, x, w, tr = args
        gi = x
        gw = w
        out.append(fc.conv_backward_flop(g, x, w, None, None, None, None, tr, None, None, [True, True, False],
                                         out_val=[gi, gw, None]))
    elif kind == "conv":
        out.append(fc.conv_flop_count(*args))
    else:
        out.append(getattr(fc, kind)(*args))
print(json.dumps(out))
"""


def _cases(n: int = 60) -> list[tuple[str, list]]:
    rnd = random.Random(21)
    d = lambda: rnd.choice([1, 3, 7, 16, 64, 129, 512, 1000])  # noqa: E731
    cases: list[tuple[str, list]] = []
    for _ in range(n):
        m, k, n_, b = d(), d(), d(), rnd.choice([1, 2, 8, 12])
        cases += [
            ("mm_flop", [[m, k], [k, n_]]),
            ("addmm_flop", [[n_], [m, k], [k, n_]]),
            ("bmm_flop", [[b, m, k], [b, k, n_]]),
            ("baddbmm_flop", [[b, m, n_], [b, m, k], [b, k, n_]]),
        ]
        h, s_q, s_k, dh = rnd.choice([1, 8, 16]), d(), d(), rnd.choice([32, 64, 128])
        cases += [
            ("sdpa_flop_count", [[b, h, s_q, dh], [b, h, s_k, dh], [b, h, s_k, dh]]),
            (
                "sdpa_backward_flop_count",
                [[b, h, s_q, dh], [b, h, s_q, dh], [b, h, s_k, dh], [b, h, s_k, dh]],
            ),
        ]
        c_in, c_out, kk, hw, g = (
            rnd.choice([3, 16, 64]),
            rnd.choice([8, 32, 128]),
            rnd.choice([1, 3, 7]),
            rnd.choice([7, 14, 56]),
            1,
        )
        x, w = [b, c_in, hw, hw], [c_out, c_in // g, kk, kk]
        out = fl.conv_out_shape(x, w, (1, 1), (kk // 2, kk // 2), (1, 1))
        cases += [("conv", [x, w, out, False]), ("conv_backward", [out, x, w, False])]
    return cases


def _ours(kind: str, args: list) -> int:
    if kind == "conv":
        return fl.conv_flop_count(*args)
    if kind == "conv_backward":
        g, x, w, tr = args
        return fl.conv_backward_flop(g, x, w, tr)
    return getattr(fl, kind)(*args)


@pytest.mark.slow
def test_formulas_agree_with_torch_flop_counter() -> None:
    from tests.user_env import user_python

    cases = _cases()
    done = subprocess.run(
        [str(user_python()), "-c", _TORCH_SIDE],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    theirs = json.loads(done.stdout)
    assert len(theirs) == len(cases) > 300
    mismatched = [(c, t, _ours(*c)) for c, t in zip(cases, theirs) if _ours(*c) != t]
    assert not mismatched, mismatched[:5]


def test_linear_and_matmul_are_their_decompositions() -> None:
    assert (
        fl.linear_flop([4, 10, 32], [16, 32]) == fl.mm_flop([40, 32], [32, 16]) == 2 * 40 * 32 * 16
    )
    assert fl.matmul_flop([8, 5, 6], [6, 7]) == 8 * fl.mm_flop([5, 6], [6, 7])
    assert fl.conv_out_shape([1, 3, 224, 224], [64, 3, 7, 7], (2, 2), (3, 3), (1, 1)) == [
        1,
        64,
        112,
        112,
    ]


def test_nested_ops_are_counted_once_and_missing_shapes_said(tmp_path) -> None:
    from profilers.trace.breakdown import breakdown
    from profilers.trace.load import load_trace

    events = [
        tf.step(1, 0, 1000),
        tf.x(
            "aten::linear",
            10,
            100,
            **{
                "Input Dims": [[64, 128], [256, 128], [256]],
                "Input type": ["float", "float", "float"],
            },
        ),
        tf.x(
            "aten::addmm",
            12,
            90,
            **{
                "Input Dims": [[256], [64, 128], [128, 256], [], []],
                "Input type": ["float", "float", "float", "Scalar", "Scalar"],
            },
        ),
        tf.x("aten::mm", 300, 50),  # no shapes recorded
        tf.kernel("sgemm_128x64", 20, 400),
    ]
    b = breakdown(load_trace(tf.write(tmp_path / "t.json", events)))
    assert b.flops is not None
    assert b.flops.total == 2 * 64 * 128 * 256  # the addmm only, not the linear around it
    assert (b.flops.with_shapes, b.flops.without_shapes) == (1, 1)
    assert b.flops.by_dtype == {"float": 2 * 64 * 128 * 256}


def test_efficiency_phrase_reads_a_cpu_peak_in_gflops_never_a_raw_float() -> None:
    """The dashboard walk read "MFU 0.9% (0.00021 of 0.0233994 TFLOP/s, …)" under a CPU run's
    headline: a CPU's rate is stated in GFLOP/s with three significant digits, a GPU's stays in TFLOP/s."""
    from profilers.efficiency.mfu import Efficiency, flops_rate

    cpu = Efficiency(
        0.00021, 0.0233994, "this host's cores, measured fp32 matmul peak", 0.009, "shapes"
    )
    assert (
        cpu.phrase()
        == "MFU 0.9% (0.21 of 23.4 GFLOP/s, this host's cores, measured fp32 matmul peak)"
    )
    gpu = Efficiency(41.2, 335.0, "V100 SXM2, fp16", 0.123, "shapes")
    assert gpu.phrase() == "MFU 12.3% (41.2 of 335 TFLOP/s, V100 SXM2, fp16)"
    assert flops_rate(0.0000001234) == "0.000123 GFLOP/s" and flops_rate(989.4) == "989 TFLOP/s"
    tiny = Efficiency(
        0.00378, 15.7, "V100 SXM2, fp32", 0.00024, "shapes"
    )  # an 8-rank DLRM step: a 0.024% MFU
    assert tiny.phrase() == "MFU 0.024% (3.78 GFLOP/s of 15.7 TFLOP/s, V100 SXM2, fp32)"
    unknown = Efficiency(
        0.0005, None, None, None, "shapes", reason="no peak is known for this device"
    )
    assert unknown.phrase() == "MFU unknown: 0.5 GFLOP/s achieved; no peak is known for this device"


@pytest.mark.parametrize(
    "tflops, said",
    [
        (1000.0, "1,000 TFLOP/s"),
        (2250.0, "2,250 TFLOP/s"),
        (4500.0, "4,500 TFLOP/s"),
        (1307.4, "1,307 TFLOP/s"),
        (989.4, "989 TFLOP/s"),
        (999.6, "1,000 TFLOP/s"),
        (100.0, "100 TFLOP/s"),
        (15.7, "15.7 TFLOP/s"),
        (1.0, "1 TFLOP/s"),
        (0.5, "500 GFLOP/s"),
        (0.0234, "23.4 GFLOP/s"),
        (0.0000001234, "0.000123 GFLOP/s"),
        (0.0, "0 GFLOP/s"),
    ],
)
def test_a_flop_rate_keeps_its_zeros(tflops: float, said: str) -> None:
    """Issue 41: "MFU 0.12% (2.79 of 225 TFLOP/s, B200, bf16 …)" where the JSON held 2250: the formatter stripped
    an integer's zeros (2250 → "225", 1000 → "1"). A peak from 1,000 TFLOP/s up reads with a thousands separator."""
    from profilers.efficiency.mfu import flops_rate

    assert flops_rate(tflops) == said


def test_the_b200_peak_reads_2250_on_every_surface() -> None:
    from profilers.efficiency.mfu import Efficiency, from_json

    b200 = Efficiency(
        2.79, 2250.0, "B200, bf16 (NVIDIA HGX B200 datasheet, dense)", 0.00124, "shapes"
    )
    said = "MFU 0.12% (2.79 of 2,250 TFLOP/s, B200, bf16 (NVIDIA HGX B200 datasheet, dense))"
    assert b200.phrase() == said
    assert (
        from_json(b200.to_json()).phrase() == said
    )  # the command line reads the JSON: the same words


def _innermost_by_thread(
    ops,
):  # the per-thread loop _innermost replaced: the reference it must match
    import numpy as np

    keep = np.ones(len(ops), dtype=bool)
    frame = ops.reset_index(drop=True)
    for _, g in frame.groupby(["rank", "tid"], observed=True, sort=False):
        g = g.sort_values(["start_ns", "end_ns"], ascending=[True, False])
        starts, ends, rows = g["start_ns"].to_numpy(), g["end_ns"].to_numpy(), g.index.to_numpy()
        for i in range(len(g) - 1):
            if starts[i + 1] < ends[i]:
                keep[rows[i]] = False
    return keep


def test_innermost_ops_are_found_by_one_sort_as_by_a_sort_per_thread() -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 25))
        ops = pd.DataFrame(
            {
                "rank": rng.integers(0, 2, n).astype(np.int32),
                "tid": pd.Categorical(rng.choice(["1", "2", "x"], n)),
                "start_ns": rng.integers(0, 20, n),
            }
        )
        ops["end_ns"] = ops["start_ns"] + rng.integers(0, 10, n)  # ties and zero lengths included
        ops.index = rng.permutation(n) + 100
        assert np.array_equal(fl._innermost(ops), _innermost_by_thread(ops))
