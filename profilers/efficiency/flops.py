"""FLOPs of a trace's matmul, convolution and attention operators, from record_shapes' ``Input Dims``.

The counts are those of ``torch.utils.flop_counter`` (its registry formulas, ported here so that analysing a
trace never imports torch; ``tests/profilers/efficiency/test_flops.py`` checks the port against torch on many shapes):
``2·m·k·n`` per matmul (bias ignored), ``2·N·C_out·C_in/g·prod(kernel)·prod(out spatial)`` per convolution,
two (forward) or five (backward) batched matmuls per scaled-dot-product attention.

Which operators count. A Kineto trace nests ops (``aten::linear`` → ``aten::addmm``; ``aten::conv2d`` →
``aten::convolution`` → ``aten::cudnn_convolution``). Only :data:`COUNTED` ops count, and of those only the ones
with no counted op inside them on the same thread (the innermost), so one product is counted once, the way
the flop counter sees it after decomposition (``linear`` as ``addmm``, ``matmul`` as ``mm``/``bmm``).

A forward convolution's output size needs its stride/padding/dilation, which ``Input Dims`` does not hold: it
is read from a convolution backward op on the same input and weight shapes (whose ``grad_output`` *is* the
output's shape); without one (inference) the op is *unsized*: counted as such and said, never guessed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

Shape = Sequence[int]

MM = frozenset({"aten::mm", "aten::_scaled_mm"})
ADDMM = frozenset({"aten::addmm"})
BMM = frozenset({"aten::bmm"})
BADDBMM = frozenset({"aten::baddbmm"})
LINEAR = frozenset({"aten::linear"})
MATMUL = frozenset({"aten::matmul"})
CONV = frozenset({"aten::convolution"})
CONV_BACKWARD = frozenset({"aten::convolution_backward", "aten::cudnn_convolution_backward"})
#: Backward ops whose first two inputs are (input, grad_output), not (grad_output, input): older cuDNN's.
INPUT_FIRST = frozenset({"aten::cudnn_convolution_backward"})
SDPA = frozenset(
    {
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::scaled_dot_product_attention",
    }
)
SDPA_BACKWARD = frozenset(
    {
        "aten::_scaled_dot_product_flash_attention_backward",
        "aten::_scaled_dot_product_efficient_attention_backward",
        "aten::_scaled_dot_product_cudnn_attention_backward",
    }
)
COUNTED = MM | ADDMM | BMM | BADDBMM | LINEAR | MATMUL | CONV | CONV_BACKWARD | SDPA | SDPA_BACKWARD


# -- the formulas (torch.utils.flop_counter's, without torch) ---------------------------------------------------
def mm_flop(a: Shape, b: Shape) -> int:
    m, k = a
    k2, n = b
    return m * n * 2 * k


def addmm_flop(_self: Shape, a: Shape, b: Shape) -> int:
    return mm_flop(a, b)


def bmm_flop(a: Shape, b: Shape) -> int:
    bs, m, k = a
    _bs2, _k2, n = b
    return bs * m * n * 2 * k


def baddbmm_flop(_self: Shape, a: Shape, b: Shape) -> int:
    return bmm_flop(a, b)


def linear_flop(x: Shape, w: Shape) -> int:
    """``x @ w.T``: what ``aten::linear`` decomposes to (``addmm``/``mm`` on ``x`` flattened to 2-D)."""
    return mm_flop((math.prod(x[:-1]), x[-1]), (w[1], w[0]))


def matmul_flop(a: Shape, b: Shape) -> int:
    """``torch.matmul``'s decomposition: 1-D operands as vectors, batch dimensions broadcast."""
    if len(a) == 1 and len(b) == 1:
        return 2 * a[0]
    a2 = (1, a[0]) if len(a) == 1 else a
    b2 = (b[0], 1) if len(b) == 1 else b
    batch = np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))
    return math.prod(batch) * mm_flop(a2[-2:], b2[-2:])


def conv_flop_count(x: Shape, w: Shape, out: Shape, transposed: bool = False) -> int:
    conv_shape = (x if transposed else out)[2:]
    c_out, c_in, *filt = w
    return math.prod(conv_shape) * math.prod(filt) * x[0] * c_out * c_in * 2


def conv_backward_flop(
    grad_out: Shape,
    x: Shape,
    w: Shape,
    transposed: bool = False,
    mask: tuple[bool, bool] = (True, True),
) -> int:
    """Gradient of the input (a transposed convolution) plus gradient of the weight (a convolution of the
    input with the output gradient), as ``torch.utils.flop_counter.conv_backward_flop`` counts them."""

    def t(s: Shape) -> list[int]:
        return [s[1], s[0], *s[2:]]

    total = 0
    if mask[0]:
        total += conv_flop_count(grad_out, w, x, not transposed)
    if mask[1]:
        total += (
            conv_flop_count(t(grad_out), t(x), t(w))
            if transposed
            else conv_flop_count(t(x), t(grad_out), t(w))
        )
    return total


def sdpa_flop_count(q: Shape, k: Shape, v: Shape) -> int:
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    return bmm_flop((b * h, s_q, d_q), (b * h, d_q, s_k)) + bmm_flop(
        (b * h, s_q, s_k), (b * h, s_k, d_v)
    )


def sdpa_backward_flop_count(grad_out: Shape, q: Shape, k: Shape, v: Shape) -> int:
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    return (
        bmm_flop((b * h, s_q, d_q), (b * h, d_q, s_k))
        + bmm_flop((b * h, s_q, d_v), (b * h, d_v, s_k))
        + bmm_flop((b * h, s_k, s_q), (b * h, s_q, d_v))
        + bmm_flop((b * h, s_q, s_k), (b * h, s_k, d_q))
        + bmm_flop((b * h, d_q, s_q), (b * h, s_q, s_k))
    )


def conv_out_shape(
    x: Shape,
    w: Shape,
    stride: Shape,
    padding: Shape,
    dilation: Shape,
    transposed: bool = False,
    output_padding: Shape = (),
) -> list[int]:
    """A convolution's output shape from its arguments (the formula of ``torch.nn.Conv*d``)."""
    spatial = []
    for i, size in enumerate(x[2:]):
        kk, s, p, d = w[2 + i], stride[i], padding[i], dilation[i]
        if transposed:
            op = output_padding[i] if i < len(output_padding) else 0
            spatial.append((size - 1) * s - 2 * p + d * (kk - 1) + op + 1)
        else:
            spatial.append((size + 2 * p - d * (kk - 1) - 1) // s + 1)
    return [x[0], w[0], *spatial]


# -- counting a trace's operators ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OpFlops:
    """FLOPs of one trace's counted ops: per row of ``ops`` (NaN where the op could not be sized), how many
    counted ops had shapes, and how many had none (record_shapes off) or could not be sized."""

    flops: pd.Series  # index = the ops' index in the events frame
    with_shapes: int
    without_shapes: int
    unsized: int


def count_ops(ops: pd.DataFrame) -> OpFlops:
    """FLOPs of the innermost counted ops among ``ops`` (host events with ``name``, ``shapes``, ``rank``, ``tid``,
    ``start_ns``, ``end_ns`` and, when recorded, ``concrete``)."""
    names = ops["name"].astype(str)
    counted = ops[names.isin(COUNTED)]
    if not len(counted):
        return OpFlops(pd.Series(dtype=float), 0, 0, 0)
    counted = counted[_innermost(counted)]
    shapes = (
        counted["shapes"].astype(str) if "shapes" in counted else pd.Series("", index=counted.index)
    )
    dims = {text: _parse(text) for text in shapes.unique()}
    out_of = _conv_outputs(counted, shapes, dims)
    # Plain lists: iterating pandas' arrays element by element cost ~0.5 us an element.
    values = [
        _flops(name, dims[text], out_of)
        for name, text in zip(counted["name"].astype(str).tolist(), shapes.tolist())
    ]
    flops = pd.Series(values, index=counted.index, dtype=float)
    without = int((shapes == "").sum())
    return OpFlops(flops, int(len(counted)) - without, without, int(flops.isna().sum()) - without)


def _innermost(ops: pd.DataFrame) -> np.ndarray:
    """True for ops with no other counted op starting inside them on the same thread: on each (rank, thread),
    ops in start order (the longer first at a tie, then file order), an op the next one starts inside is not
    innermost. One sort of all of them, not a sort per thread."""
    keep = np.ones(len(ops), dtype=bool)
    if len(ops) < 2:
        return keep
    rank, thread = ops["rank"].to_numpy(), pd.factorize(ops["tid"])[0]
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    order = np.lexsort((-end, start, thread, rank))  # stable: ties keep their order
    same = (rank[order][1:] == rank[order][:-1]) & (thread[order][1:] == thread[order][:-1])
    keep[order[:-1][same & (start[order][1:] < end[order][:-1])]] = False
    return keep


def _parse(text: str) -> list | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _conv_outputs(counted: pd.DataFrame, shapes: pd.Series, dims: dict) -> dict[tuple, list[int]]:
    """(input shape, weight shape) → output shape, from the convolution backward ops (their grad_output)."""
    out: dict[tuple, list[int]] = {}
    names = counted["name"].astype(str)
    back = names.isin(CONV_BACKWARD)
    for name, text in set(zip(names[back].tolist(), shapes[back].tolist())):
        d = _backward_order(name, dims[text])
        if d and len(d) >= 3 and _tensor(d[0]) and _tensor(d[1]) and _tensor(d[2]):
            grad_out, x, w = d[0], d[1], d[2]
            out[(tuple(x), tuple(w))] = list(grad_out)
    return out


def _backward_order(name: str, d: list | None) -> list | None:
    """A convolution backward's dims as (grad_output, input, weight, …), whichever order its op takes."""
    return [d[1], d[0], *d[2:]] if d and name in INPUT_FIRST and len(d) >= 2 else d


def _tensor(x: object) -> bool:
    return isinstance(x, list) and len(x) > 0 and all(isinstance(v, int) for v in x)


def _flops(name: str, d: list | None, conv_out: dict[tuple, list[int]]) -> float:
    if not d:
        return math.nan
    try:
        if name in MM:
            return mm_flop(d[0], d[1])
        if name in ADDMM:
            return addmm_flop(d[0], d[1], d[2])
        if name in BMM:
            return bmm_flop(d[0], d[1])
        if name in BADDBMM:
            return baddbmm_flop(d[0], d[1], d[2])
        if name in LINEAR:
            return linear_flop(d[0], d[1])
        if name in MATMUL:
            return matmul_flop(d[0], d[1])
        if name in CONV:
            out = conv_out.get((tuple(d[0]), tuple(d[1])))
            return math.nan if out is None else conv_flop_count(d[0], d[1], out)
        if name in CONV_BACKWARD:
            g = _backward_order(name, d) or d
            return conv_backward_flop(g[0], g[1], g[2])
        if name in SDPA:
            return sdpa_flop_count(d[0], d[1], d[2])
        if name in SDPA_BACKWARD:
            return sdpa_backward_flop_count(d[0], d[1], d[2], d[3])
    except (ValueError, TypeError, IndexError):
        return math.nan
    return math.nan


@dataclass(frozen=True)
class TraceFlops:
    """What :func:`trace_flops` counted inside steps: FLOPs per (rank, step), FLOPs by the ops' first input
    dtype ("float", "c10::BFloat16"…), and how many counted ops had shapes, had none, or could not be sized."""

    per_step: dict[tuple[int, int], float]
    by_dtype: dict[str, float]
    with_shapes: int
    without_shapes: int
    unsized: int

    @property
    def total(self) -> float:
        return float(sum(self.per_step.values()))


def trace_flops(events: pd.DataFrame) -> TraceFlops:
    """Count the FLOPs of the host ops inside steps of a normalised events frame (see the module docs)."""
    # The counted ops' rows only (a few thousand of ~10^5), picked by name code before any frame is copied.
    names = events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        named = np.append(names.cat.categories.isin(COUNTED), False)[names.cat.codes.to_numpy()]
    else:
        named = names.astype(str).isin(COUNTED).to_numpy()
    host = events[(events["device"].to_numpy() < 0) & (events["step"].to_numpy() >= 0) & named]
    if "shapes" not in host:
        host = host.assign(shapes="")
    counted = count_ops(host)
    known = counted.flops.dropna()
    rows = host.loc[known.index]
    per_step: dict[tuple[int, int], float] = {}
    by_dtype: dict[str, float] = {}
    for (rank, step, dtype), value in zip(
        zip(rows["rank"], rows["step"], rows["dtype"].astype(str)), known
    ):
        per_step[(int(rank), int(step))] = per_step.get((int(rank), int(step)), 0.0) + float(value)
        by_dtype[dtype] = by_dtype.get(dtype, 0.0) + float(value)
    return TraceFlops(
        per_step, by_dtype, counted.with_shapes, counted.without_shapes, counted.unsized
    )
