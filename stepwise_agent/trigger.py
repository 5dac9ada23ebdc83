"""When a watched run should profile itself: the rules that fire a capture, and the limit on how often one may
(standard library only; :mod:`stepwise_agent.watch` feeds them one step at a time).

Every unprofiled step past the warm-up joins a **rolling baseline** — but only once newer steps are judged, so the
steps being judged are never part of what they are judged against. A step next to a capture
(:data:`stepwise_agent.steady.AFTER_PROFILER` after it) is left out, as the run's one step time leaves it out
(:mod:`stepwise_agent.steady`).

The steps judged are the last :data:`RECENT` steps, or more: as many as the last :data:`MIN_JUDGED_S` of wall
time holds (at most :data:`MAX_RECENT`), and all but :data:`ALLOWED_BELOW` (a quarter) of them must be out of line:
a shift must last most of a second to be one. On a 10-ms step, 8 slower steps are 80 ms, a blip of another program
that a trace cannot explain anyway (the telemetry samples 10 times a second, and the capture's analysis judges other
programs' load over the judged steps from at least 5 samples); on a busy machine such blips came every minute (a
steady script was captured at "+39% for 8 steps" in CI).

A step time also **wanders**: a steady 15-ms script on a quiet 2-core machine went between 13 and 23 ms in phases
of a second or two, a steady 90-ms one between 69 and 116 ms; judged over one second, each fired now and then
(+30-45%) with nothing else running, over two seconds neither did in 3,800 recorded steps, while a lasting
+30% on the 90-ms one still fired within 7 steps. Its steps are not independent, so the noise of a judged median is the larger of two spreads:
that of the difference of two medians if steps were independent (the baseline's spread, MAD-based, over √ the
judged count and over √ its own count), and that of the medians of the baseline's own stretches of as many steps
(MAD-based). The rules are judged once the baseline holds :data:`MIN_BASELINE` steps and :data:`MIN_BLOCKS` such
stretches (about 10 s of a fast step, 40 steps of a slow one):

- **step time**: the median of the judged steps is above the baseline's median by more than :data:`NOISE_SIGMAS`
  times that noise and by at least the **floor** (:data:`MIN_RISE` of it, ``watch --min-rise``), and all but
  :data:`ALLOWED_BELOW` of those steps are that much slower — "slower, beyond its own noise, for several steps";
- **batch drawing**: the share of those steps' wall time spent drawing batches (``data_ms``) rose by at least
  :data:`SHARE_JUMP` (an absolute share: 0.10 → 0.35), in all but :data:`ALLOWED_BELOW` of those steps — the
  loader falling behind, even where the step time hides it;
- **memory**: over the last :data:`MEMORY_WINDOW` steps memory grew steadily (a straight line fits it, it never
  fell back by more than :data:`MEMORY_GIVE_BACK` of the growth: an allocator grows in chunks, a leak never gives
  back) by at least :data:`MEMORY_MIN_MB` and :data:`MEMORY_MIN_GROWTH` of the headroom to the limit (the
  device's, the budget's, or the host's) — a loop that keeps what it should free.

The floor is higher (:data:`CPU_MIN_RISE`) when the step runs on the host's cores (no CUDA; the recorder decides
once the warm-up is over, :mod:`stepwise_agent.watch`): its threads share the cores with every other program, and on
a quiet 2-core machine a steady 80-ms CPU step ran at +25% for 2.5 s, twice in one run (phases its baseline of
10 s had not seen; a CI run was captured at "+24% for 20 steps (2.0 s)", beyond a noise of ±18.7 ms learnt from 7
stretches), while another program taking the cores slowed it by +100% and a loader falling behind by +157%.

**One episode, one capture.** After the step-time or batch-drawing rule fires, both are *held*
(one cause slows the step and changes its batch drawing) until the episode has **cleared**: the
judged steps' median back within the noise of the baseline they fired against (or within half the
floor of a rise, if larger: a wandering step does not clear and fire again at the line), their
batch-drawing share within half of :data:`SHARE_JUMP` of its own. That baseline is then restored,
and a new episode fires at once. A baseline learnt afresh from the slowed steps (10 s of them)
would be beaten by another program's next busier phase: a second capture of the same episode. An
episode held for :data:`SETTLE_S` of steps is the run's new normal: the baseline learnt meanwhile
is kept and the rules judge again. The memory rule is never held (its window starts afresh).

After a rule fires, the baseline is learnt afresh; :class:`RateLimit` decides whether the capture
may happen: at most :data:`MAX_PER_HOUR` an hour, never past :data:`MAX_SHARE` of the run's time.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from stepwise_agent.steady import AFTER_PROFILER

WARMUP_STEPS = 5  # lazy initialisation, allocator growth, autotuning: never part of the baseline
RECENT = 8  # the fewest steps judged at once ("for several steps")
MIN_JUDGED_S = (
    2.0  # … and at least this much wall time of them (see the module docs; ``watch --judged-s``)
)
MAX_RECENT = 256  # … but never more steps than this (1 s of 4-ms steps)
MIN_BASELINE = 40
MIN_BLOCKS = (
    4  # … and at least this many stretches as long as the judged steps (see the module docs)
)
MAX_BASELINE = 2000
REFRESH = (
    32  # steps between two computations of the baseline's statistics (or the judged count, if more)
)
NOISE_SIGMAS = 4.0
MIN_RISE = (
    0.20  # a rise smaller than this share of the step time is not worth a trace (a GPU's step) …
)
CPU_MIN_RISE = 0.50  # … nor, on a step that runs on the host's cores, one smaller than this (see the module docs)
ALLOWED_BELOW = (
    0.25  # of the judged steps, at most this share may be under the rise (a burst is not a shift)
)
SHARE_JUMP = 0.15
SHARE_SAID = (
    0.05  # a smaller change of the batch-drawing share is not worth a word beside a step-time rise
)
MEMORY_WINDOW = 50
MEMORY_MIN_GROWTH = (
    0.002  # of the headroom the window started with: 0.5% (110 MiB on a host with 22 GiB free)
)
# missed a 2–3 MiB-a-step leak in 1 of 6 runs, the floor moving with the free memory; 64 MiB binds below 32 GiB
MEMORY_MIN_MB = 64.0
MEMORY_GIVE_BACK = (
    0.25  # of the growth: a larger fall on the way means memory is used and freed, not kept (which
)
# gives back all of it); at 0.1 the allocator's trims (16 MiB falls in a 2-3 MiB-a-step leak, 9-12% of a window's
# growth) held a capture back by 30 steps in CI
MEMORY_MIN_R2 = 0.8
SETTLE_S = 300.0  # an episode held this long (its steps' wall time) is the run's new normal
MAX_PER_HOUR = 6
MAX_SHARE = 0.05
MAD_TO_SIGMA = 1.4826

STEP_TIME, DATA_SHARE, MEMORY, ON_DEMAND = "step_time", "data_share", "memory", "on_demand"


@dataclass(frozen=True)
class Fired:
    """A rule that fired at ``step``: which (``kind``), what it saw in words (``reason``) and in numbers
    (``numbers``: the judged steps' count and span, the step-time rule's ``base_ms``, ``now_ms``,
    ``rise_pct`` and ``noise_ms``, the batch-drawing rule's ``base_share`` and ``now_share``, the
    memory rule's growth, slope and fit, which the capture's analysis judges again)."""

    kind: str
    step: int
    reason: str
    numbers: tuple[tuple[str, float], ...] = ()

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "step": self.step, "reason": self.reason}
        if self.numbers:
            out["numbers"] = dict(self.numbers)
        return out


@dataclass(frozen=True)
class _Hold:
    """The rise rules held after one fired: the baseline they fired against (its steps, median,
    noise and batch-drawing share), restored once the episode clears."""

    steps: tuple[tuple[float, float | None], ...]
    base: float
    noise: float
    base_share: float | None

    def line(self, min_rise: float) -> float:
        """The step time the judged steps' median must be back under (ms; see the module docs)."""
        return self.base + max(self.noise, 0.5 * min_rise * self.base)

    def cleared(self, walls: list[float], shares: list[float], min_rise: float) -> bool:
        """Whether judged steps of ``walls`` (and ``shares``) are back to the held baseline."""
        if statistics.median(walls) > self.line(min_rise):
            return False
        return (
            self.base_share is None
            or len(shares) < len(walls) // 2
            or statistics.median(shares) < self.base_share + 0.5 * SHARE_JUMP
        )


def _robust_sigma(values: list[float], centre: float) -> float:
    return MAD_TO_SIGMA * statistics.median(abs(v - centre) for v in values)


def _line_fit(ys: list[float]) -> tuple[float, float]:
    """Slope per step and R² of a least-squares line through ``ys`` (at steps 0, 1, …)."""
    n = len(ys)
    mx, my = (n - 1) / 2.0, sum(ys) / n
    sxx = sum((i - mx) ** 2 for i in range(n))
    sxy = sum((i - mx) * (y - my) for i, y in enumerate(ys))
    syy = sum((y - my) ** 2 for y in ys)
    slope = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 0.0
    return slope, r2


class Trigger:
    """Feed it every step (:meth:`observe`); it says when a rule fires (see the module docs). ``limit_mb``: the
    memory the run may reach (None: the memory rule is off); ``judged_s``: the wall time the judged steps span
    (:data:`MIN_JUDGED_S`); ``min_rise``: the floor of a step-time rise, a share of the step time
    (:data:`MIN_RISE`; the watch sets :data:`CPU_MIN_RISE` for a step on the host's cores)."""

    def __init__(
        self,
        limit_mb: float | None = None,
        judged_s: float = MIN_JUDGED_S,
        min_rise: float = MIN_RISE,
    ) -> None:
        self.limit_mb = limit_mb
        self.judged_ms = max(float(judged_s), 0.0) * 1000.0
        self.min_rise = max(float(min_rise), 0.0)
        self._hold: _Hold | None = None  # the rise rules held (see the module docs)
        self._held_ms = 0.0  # the wall time of the steps seen since
        self._reset()

    @property
    def held(self) -> bool:
        """Whether the step-time and batch-drawing rules are held (an episode has not cleared)."""
        return self._hold is not None

    def _reset(self) -> None:
        self._base: deque[tuple[float, float | None]] = deque(maxlen=MAX_BASELINE)  # (wall, share)
        self._recent: deque[tuple[float, float | None]] = (
            deque()
        )  # the judged steps (see the module docs)
        self._recent_ms = 0.0
        self._memory: deque[float] = deque(maxlen=MEMORY_WINDOW)
        self._seen = 0
        self._stats: tuple[float, float, float | None] | None = None
        self._stats_at = 0
        self._blocks = 0  # the baseline's stretches in the last statistics (see _baseline)

    def relearn(self, keep_memory: bool = False) -> None:
        """Forget the baseline (after a capture, or a rule that fired): the next steps are the new normal.
        ``keep_memory``: a step-time shift says nothing of a memory trend, which goes on being watched."""
        memory = self._memory
        self._reset()
        if keep_memory:
            self._memory = memory

    def observe(
        self,
        step: int,
        wall_ms: float,
        data_ms: float | None,
        memory_mb: float | None,
        near_capture: bool = False,
    ) -> Fired | None:
        """Judge one finished step; ``near_capture``: it was profiled or next to a capture (not part of any
        baseline). Costs a few microseconds: the rules are judged only when this step is itself out of line."""
        self._seen += 1
        if near_capture or self._seen <= WARMUP_STEPS:
            return None
        share = data_ms / wall_ms if data_ms is not None and wall_ms > 0 else None
        self._recent.append((wall_ms, share))
        self._recent_ms += wall_ms
        while len(self._recent) > MAX_RECENT or (
            len(self._recent) > RECENT and self._recent_ms - self._recent[0][0] >= self.judged_ms
        ):
            oldest = self._recent.popleft()  # the oldest judged step joins the baseline
            self._recent_ms -= oldest[0]
            self._base.append(oldest)
        fired = None
        if memory_mb is not None:
            self._memory.append(memory_mb)
            if self._seen % RECENT == 0:
                fired = self._memory_rule(step)
        if self._hold is not None:
            self._held_ms += wall_ms
            self._release(wall_ms, share)
        if (
            fired is None
            and self._hold is None
            and len(self._base) >= max(MIN_BASELINE, MIN_BLOCKS * len(self._recent))
            and self._judged_full()
        ):
            base, _, base_share = self._baseline()
            if wall_ms > base * (1.0 + self.min_rise) or (
                share is not None and base_share is not None and share >= base_share + SHARE_JUMP
            ):
                fired = self._judge(step)
        if fired is not None:
            if fired.kind != MEMORY and self._stats is not None:
                self._hold, self._held_ms = _Hold(tuple(self._base), *self._stats), 0.0
            self.relearn(keep_memory=fired.kind != MEMORY)
        return fired

    def _release(self, wall_ms: float, share: float | None) -> None:
        """End the hold when the episode cleared (its baseline is restored) or lasted
        :data:`SETTLE_S` (the baseline learnt since is kept: the run's new normal). Judged only on
        a step back under the line: a step of the episode costs no median."""
        hold = self._hold
        assert hold is not None
        if self._held_ms >= SETTLE_S * 1000.0:
            self._hold = None
            return
        share_line = None if hold.base_share is None else hold.base_share + 0.5 * SHARE_JUMP
        out_of_line = wall_ms > hold.line(self.min_rise) or (
            share is not None and share_line is not None and share >= share_line
        )
        if out_of_line or not self._judged_full():
            return
        walls = [w for w, _ in self._recent]
        shares = [s for _, s in self._recent if s is not None]
        if hold.cleared(walls, shares, self.min_rise):
            self._hold = None
            self._base = deque(hold.steps, maxlen=MAX_BASELINE)
            self._stats, self._blocks = None, 0

    def _judged_full(self) -> bool:
        """Whether the judged steps are as many and as long as a judgement needs (see the module docs)."""
        n = len(self._recent)
        return n >= RECENT and (self._recent_ms >= self.judged_ms or n >= MAX_RECENT)

    def _baseline(self) -> tuple[float, float, float | None]:
        """The baseline's median step time, the noise of a judged median against it (ms) and its batch-drawing
        share (None: unknown), recomputed every :data:`REFRESH` steps (or judged count, if more): the baseline
        drifts slowly, and a step must cost microseconds (see the module docs for the noise)."""
        n = len(self._recent)
        if (
            self._stats is None
            or self._seen - self._stats_at >= max(REFRESH, n)
            or self._blocks < MIN_BLOCKS
        ):
            walls = [w for w, _ in self._base]
            base = statistics.median(walls)
            # steps as if independent: the spread of one step over √n, and the baseline's own median's
            noise = (
                NOISE_SIGMAS
                * 1.25
                * _robust_sigma(walls, base)
                * (1.0 / n + 1.0 / len(walls)) ** 0.5
            )
            # the step time wanders: the spread of the medians of the baseline's own stretches of n steps
            blocks = [
                statistics.median(walls[i : i + n])
                for i in range(len(walls) % n, len(walls) - n + 1, n)
            ]
            self._blocks = len(blocks)
            if len(blocks) >= MIN_BLOCKS:
                spread = _robust_sigma(blocks, statistics.median(blocks))
                noise = max(noise, NOISE_SIGMAS * spread * (1.0 + 1.0 / len(blocks)) ** 0.5)
            shares = [s for _, s in self._base if s is not None]
            self._stats = (
                base,
                noise,
                statistics.median(shares) if len(shares) >= MIN_BASELINE // 2 else None,
            )
            self._stats_at = self._seen
        return self._stats

    def _judge(self, step: int) -> Fired | None:
        """The step-time and batch-drawing rules over the RECENT steps (see the module docs)."""
        base, noise, base_share = self._baseline()
        n = len(self._recent)
        now = statistics.median(w for w, _ in self._recent)
        recent_shares = [s for _, s in self._recent if s is not None]
        shares = (
            (base_share, statistics.median(recent_shares))
            if base_share is not None and len(recent_shares) >= n // 2
            else None
        )
        share_text = (
            f", batch drawing {shares[0]:.0%} → {shares[1]:.0%} of the step"
            if shares and abs(shares[1] - shares[0]) >= SHARE_SAID
            else ""
        )
        needed = n - int(ALLOWED_BELOW * n)
        above = sum(1 for w, _ in self._recent if w > base * (1.0 + self.min_rise))
        span = f"for {n} steps ({self._recent_ms / 1000.0:.1f} s)"
        span_s = round(self._recent_ms / 1000.0, 3)
        numbers: tuple[tuple[str, float], ...] = (("judged_steps", float(n)), ("judged_s", span_s))
        numbers += (("base_ms", round(base, 2)), ("now_ms", round(now, 2)))
        if base > 0 and now > base + max(noise, self.min_rise * base) and above >= needed:
            rise = (now / base - 1.0) * 100.0
            return Fired(
                STEP_TIME,
                step,
                f"step time +{rise:.0f}% {span} ({base:.1f} → {now:.1f} ms, "
                f"beyond its noise of ±{noise:.1f} ms){share_text}",
                numbers + (("rise_pct", round(rise, 1)), ("noise_ms", round(noise, 2))),
            )
        if (
            shares is not None
            and shares[1] - shares[0] >= SHARE_JUMP
            and sum(1 for s in recent_shares if s >= shares[0] + SHARE_JUMP) >= needed
        ):
            return Fired(
                DATA_SHARE,
                step,
                f"batch drawing {shares[0]:.0%} → {shares[1]:.0%} of the step {span} "
                f"(step time {base:.1f} → {now:.1f} ms)",
                numbers + (("base_share", round(shares[0], 3)), ("now_share", round(shares[1], 3))),
            )
        return None

    def _memory_rule(self, step: int) -> Fired | None:
        if self.limit_mb is None or len(self._memory) < MEMORY_WINDOW:
            return None
        ys = list(self._memory)
        grown = ys[-1] - ys[0]
        headroom = self.limit_mb - ys[0]
        peak, given_back = ys[0], 0.0
        for y in ys:  # a leak never gives back: the largest fall from the running peak
            peak = max(peak, y)
            given_back = max(given_back, peak - y)
        if (
            grown < max(MEMORY_MIN_MB, MEMORY_MIN_GROWTH * max(headroom, 0.0))
            or given_back > MEMORY_GIVE_BACK * grown
        ):
            return None
        slope, r2 = _line_fit(ys)
        if r2 < MEMORY_MIN_R2 or slope <= 0:
            return None
        left = max((self.limit_mb - ys[-1]) / slope, 0.0)
        numbers = (
            ("grown_mb", round(grown, 1)),
            ("window_steps", float(len(ys))),
            ("mb_per_step", round(slope, 2)),
            ("r2", round(r2, 3)),
            ("start_mb", round(ys[0], 1)),
            ("end_mb", round(ys[-1], 1)),
            ("limit_mb", round(self.limit_mb, 1)),
            ("steps_left", round(left)),
        )
        return Fired(
            MEMORY,
            step,
            f"memory +{grown:.0f} MiB over {len(ys)} steps, steadily ({slope:.1f} MiB a step, "
            f"R² {r2:.2f}): at this rate the limit of {self.limit_mb:.0f} MiB is reached in "
            f"about {left:,.0f} steps",
            numbers,
        )


class RateLimit:
    """At most ``per_hour`` captures in any hour, and none once captures took ``max_share`` of the run's time."""

    def __init__(
        self,
        per_hour: int = MAX_PER_HOUR,
        max_share: float = MAX_SHARE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_hour, self.max_share, self._clock = per_hour, max_share, clock
        self._started = clock()
        self._times: list[float] = []
        self.spent_s = 0.0

    def refusal(self) -> str | None:
        """Why a capture may not start now, or None when it may."""
        now = self._clock()
        recent = [t for t in self._times if now - t < 3600.0]
        if len(recent) >= self.per_hour:
            return f"rate limit: {self.per_hour} captures in the last hour"
        elapsed = max(now - self._started, 1e-9)
        if self._times and self.spent_s / elapsed >= self.max_share:
            return (
                f"rate limit: captures already took {self.spent_s / elapsed:.0%} of the run's time "
                f"(at most {self.max_share:.0%})"
            )
        return None

    def started(self) -> None:
        self._times.append(self._clock())

    def spent(self, seconds: float) -> None:
        self.spent_s += max(seconds, 0.0)


def near_capture(step: int, windows: list[tuple[int, int]]) -> bool:
    """Whether ``step`` is inside a capture window (first, last) or within ``AFTER_PROFILER`` steps after one."""
    return any(first - 1 <= step <= last + AFTER_PROFILER for first, last in windows)
