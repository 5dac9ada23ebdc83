"""A run's quality against wall-clock time: :class:`Curve`, how it is read from a run, and how it is smoothed.

Time is the run's own clock, from the end of its first step (process start, imports, data loading and model
build are left out, the same for every arm; :func:`clock_start_ns`): a point's time is when the step that
produced it ended (:func:`step_ends`).
A printed metric (``--metric REGEX``) is placed at the time its line was printed, on the same clock.

Smoothing (training loss only; a printed metric is already an aggregate and is used as printed): an
exponential moving average with ``alpha`` = :data:`EMA_ALPHA` (0.1: each new step weighs 10 %), debiased as
TensorBoard does (``ema_t / (1 − (1 − alpha)^t)``), so the first points are not pulled toward 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

import numpy as np
import pandas as pd

Goal = Literal["min", "max"]
EMA_ALPHA = 0.1


@dataclass(frozen=True)
class Curve:
    """``values[i]`` seen at ``times_s[i]`` seconds of training (``steps[i]`` steps done); ``end_s`` is when the
    run stopped (its budget, or earlier when it failed), ``smoothed`` says whether values are the EMA."""

    times_s: tuple[float, ...]
    values: tuple[float, ...]
    steps: tuple[int, ...]
    end_s: float
    smoothed: bool = False

    def __post_init__(self) -> None:
        if not len(self.times_s) == len(self.values) == len(self.steps):
            raise ValueError("a curve needs as many times and steps as values")
        if any(b < a for a, b in zip(self.times_s, self.times_s[1:])):
            raise ValueError("a curve's times must not go backwards")

    def __len__(self) -> int:
        return len(self.values)

    def value_at_time(self, t_s: float) -> float | None:
        """The last value seen at or before ``t_s`` (``None`` before the first point)."""
        i = int(np.searchsorted(np.asarray(self.times_s), t_s, side="right")) - 1
        return self.values[i] if i >= 0 else None

    def cut(self, t_s: float) -> Curve:
        """The curve as it was at ``t_s``: points after it dropped, the end moved there."""
        keep = [i for i, t in enumerate(self.times_s) if t <= t_s]
        return Curve(
            tuple(self.times_s[i] for i in keep),
            tuple(self.values[i] for i in keep),
            tuple(self.steps[i] for i in keep),
            min(self.end_s, t_s),
            self.smoothed,
        )


def ema(values: Sequence[float], alpha: float = EMA_ALPHA) -> tuple[float, ...]:
    """Debiased exponential moving average (see the module docs)."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    out, acc = [], 0.0
    for t, v in enumerate(values, start=1):
        acc = (1 - alpha) * acc + alpha * v
        out.append(acc / (1 - (1 - alpha) ** t))
    return tuple(out)


def smoothed(curve: Curve, alpha: float = EMA_ALPHA) -> Curve:
    if curve.smoothed:
        return curve
    return Curve(curve.times_s, ema(curve.values, alpha), curve.steps, curve.end_s, smoothed=True)


def loss_curve_from_steps(steps: pd.DataFrame) -> Curve:
    """The training loss of a run's ``steps.jsonl`` rows against its clock (:func:`step_ends`); the loss is the
    mean over ranks; steps without a finite loss are timed but carry no point."""
    if steps.empty:
        return Curve((), (), (), 0.0)
    ends = step_ends(steps)
    loss = steps.groupby("step")["loss"].mean().sort_index()
    keep = [
        (int(s), float(v))
        for s, v in zip(loss.index.tolist(), loss.tolist())
        if isinstance(v, float) and math.isfinite(v) and int(s) in ends
    ]
    return Curve(
        tuple(ends[s] for s, _ in keep),
        tuple(v for _, v in keep),
        tuple(s + 1 for s, _ in keep),
        max(ends.values(), default=0.0),
    )


def clock_start_ns(steps: pd.DataFrame) -> int | None:
    """The zero of a run's clock: when its first step ended (slowest rank), in ``t_unix_ns``; ``None`` without
    step times. Not its start: a launched script's first step also holds the script's own start-up (imports, data
    loading, model build, timed from before the script runs), which no change to training touches."""
    if steps.empty or "t_unix_ns" not in steps or steps["t_unix_ns"].isna().all():
        return None
    first = steps[steps["step"] == steps["step"].min()]
    return int(
        (
            first["t_unix_ns"].astype("float64")
            + first["wall_ms"].astype("float64").fillna(0.0) * 1e6
        ).max()
    )


def step_ends(steps: pd.DataFrame) -> dict[int, float]:
    """``{step: seconds from the end of the first step to the end of this one}`` (slowest rank). With step start
    times (``t_unix_ns``) this is the real elapsed time — what the script did between steps (evaluation, logging)
    included; without them, the running sum of the later steps' wall times."""
    t0 = clock_start_ns(steps)
    if t0 is not None:
        ends_ns = steps["t_unix_ns"].astype("float64") + steps["wall_ms"].astype("float64") * 1e6
        ends = ends_ns.groupby(steps["step"]).max().sort_index()
        return {
            int(s): max((float(e) - t0) / 1e9, 0.0)
            for s, e in zip(ends.index.tolist(), ends.tolist())
            if math.isfinite(e)
        }
    walls = steps.groupby("step")["wall_ms"].max().sort_index().fillna(0.0).to_numpy(dtype=float)
    walls[:1] = 0.0
    index = sorted(int(s) for s in steps["step"].unique())
    return {s: float(e) / 1e3 for s, e in zip(index, np.cumsum(walls))}


def compile_metric(pattern: str) -> re.Pattern[str]:
    """``--metric REGEX``: it must hold exactly one capturing group, the number."""
    try:
        rx = re.compile(pattern)
    except re.error as err:
        raise ValueError(f"--metric {pattern!r} is not a regular expression: {err}") from None
    if rx.groups != 1:
        raise ValueError(
            f"--metric {pattern!r} must have exactly one (group) around the number, it has "
            f"{rx.groups}"
        )
    return rx


def printed_curve(
    lines: Iterable[tuple[float, str]],
    pattern: str,
    end_s: float,
    steps_at: Sequence[tuple[float, int]] = (),
) -> Curve:
    """A metric the script prints: every ``(time_s, line)`` whose line matches ``pattern`` gives one point (the
    first match in the line; a group that is not a number is skipped). ``steps_at``: ``(time_s, steps done)``
    pairs to say how many steps each point came after (0 when not given)."""
    rx = compile_metric(pattern)
    times, values, steps = [], [], []
    marks = sorted(steps_at)
    for t, line in lines:
        m = rx.search(line)
        if m is None:
            continue
        try:
            v = float(m.group(1))
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v):
            continue
        times.append(float(t))
        values.append(v)
        steps.append(max((n for ts, n in marks if ts <= t), default=0))
    order = np.argsort(times, kind="stable")
    return Curve(
        tuple(times[i] for i in order),
        tuple(values[i] for i in order),
        tuple(steps[i] for i in order),
        max(end_s, max(times, default=0.0)),
        smoothed=True,
    )


def reached(value: float, target: float, goal: Goal) -> bool:
    return value <= target if goal == "min" else value >= target


def time_to_target(curve: Curve, target: float, goal: Goal) -> float | None:
    """Seconds until the (smoothed) curve first reaches ``target``: the time of the first point at or past it
    (no interpolation: the run could only have known at that point). ``None``: never within the run."""
    for t, v in zip(curve.times_s, curve.values):
        if reached(v, target, goal):
            return t
    return None
