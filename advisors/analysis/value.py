"""``Analysis``: every number any surface shows about one input, computed once by :func:`advisors.analysis.analyse`.

The facts (the trace's :class:`~profilers.trace.breakdown.Breakdown`, a stored run's :class:`RunFacts`, a memory
snapshot's summary, the cross-rank views of a job), the advisor's :class:`~advisors.verdict.Diagnosis` (findings,
their bounds, the fix order), the efficiency (MFU against its peak), and the small frames the pages draw. The
derived words and numbers (the one step time and its basis, samples/s, the headline) are properties here, so a
page, a report and ``analyze --json`` read them from one place; :meth:`Analysis.to_json` *is* ``analyze --json``.

Small and picklable: never the raw events (a 100 MB trace becomes a few hundred rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from advisors.analysis.document import NO_EFFICIENCY, no_trace_summary, run_json
from advisors.analysis.layers import layers_json
from advisors.bounds import Bound
from advisors.diagnosis import bound_of, diagnosis_json
from advisors.observation import RunFacts
from advisors.ranking import Ranking, rank
from advisors.verdict import Diagnosis, Finding
from profilers.errors import StepwiseError
from profilers.efficiency.mfu import Efficiency, efficiency
from profilers.efficiency.peaks import device_peak
from profilers.efficiency.accelerator import is_non_gpu
from profilers.jobs.agent_summaries import is_run_views
from profilers.trace.breakdown import Breakdown
from profilers.layers import Layers
from profilers.trace.memory_snapshot import GIB, MemorySnapshot, gib_device, snapshot_json
from profilers.trace.summary import breakdown_summary


@dataclass(frozen=True)
class Analysis:
    """One analysed input. ``breakdown`` is ``None`` for a run that left no readable trace and for a memory
    snapshot (``notes`` say why).

    Frames (all small): ``timeline`` and ``step_spans`` (:mod:`profilers.frames.timeline`, empty when the input
    was analysed without charts), ``memory`` (:func:`profilers.frames.timeline.memory_series`), ``steps`` (a
    run's ``steps.jsonl``: rank, step, wall_ms, loss, samples, profiled, t_unix_ns) and ``telemetry``
    (:func:`profilers.frames.telemetry.downsample_telemetry`).
    """

    label: str
    kind: str  # "trace" (a path or an upload) | "run" | "launch"
    breakdown: Breakdown | None
    run: RunFacts | None
    diagnosis: Diagnosis | None
    advisor_note: str | None  # why ``diagnosis`` is None
    efficiency: Efficiency | None  # None: no profiled steps to measure
    timeline: pd.DataFrame
    step_spans: pd.DataFrame
    memory: pd.DataFrame
    steps: pd.DataFrame
    telemetry: pd.DataFrame
    n_events: int = 0
    notes: tuple[str, ...] = field(default=())
    snapshot: MemorySnapshot | None = (
        None  # a memory snapshot's summary (then there is no breakdown)
    )
    device_memory_bytes: int | None = None  # the device total the user stated, for a snapshot
    summarised_ranks: int = (
        0  # read from this many ranks' summaries (a folder of many ranks): no event loaded
    )
    # The cross-rank views (stragglers, the slowest rank's critical path): a folder of ranks' map and reduce, or
    # a ``--trace-ranks`` run's agent summaries (profilers.jobs.agent_summaries.run_job_views) of all N ranks,
    # where the breakdown holds only the k ranks that kept a trace. The ``job`` of ``analyze --json``.
    job: dict[str, Any] | None = None
    # Where in the model the step goes: one row per module, repeated blocks grouped (profilers.layers)
    layers: Layers = field(default_factory=Layers)

    @property
    def n_ranks(self) -> int:
        """How many ranks the input has: a ``--trace-ranks`` run's every rank that wrote a summary, not only the
        ranks that kept a trace (the breakdown's); the one count the page and the report show."""
        if is_run_views(self.job):
            return len(self.job["ranks"])
        return len(self.breakdown.ranks) if self.breakdown is not None else 0

    @property
    def summary(self) -> dict[str, Any] | None:
        """The breakdown's JSON summary (:func:`profilers.trace.summary.breakdown_summary`: the facts half of
        ``analyze --json``), None without a breakdown."""
        return breakdown_summary(self.breakdown) if self.breakdown is not None else None

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.breakdown.warnings if self.breakdown is not None else ()

    @property
    def step_time_ms(self) -> float | None:
        """The input's one step time, the same on every page, in every report and in ``analyze
        --json``: a stored run's time per step over its measured steps after warm-up (elapsed ÷
        steps, its ``result.json``, what the run list shows); a trace's median profiled step.
        ``None`` when nothing was timed."""
        if self.run is not None and self.run.step_time_ms is not None:
            return self.run.step_time_ms
        return self.profiled_step_time_ms

    @property
    def profiled_step_time_ms(self) -> float | None:
        """The profiled window's own median step (the trace's steps, profiler overhead included)."""
        return (
            self.breakdown.step_time_ms
            if self.breakdown is not None and self.breakdown.n_steps
            else None
        )

    @property
    def step_time_basis(self) -> str:
        """What :attr:`step_time_ms` is measured over, in words (a tooltip, a report's footnote)."""
        if self.run is not None and self.run.step_time_ms is not None:
            return run_step_basis(self.run.step_time_steps, self.run.step_time_basis)
        return "median profiled step of the trace"

    @property
    def samples_per_s(self) -> float | None:
        """A stored run's samples/s over its measured steps (``stepwise_agent.steady.samples_per_s``, stored in
        its result); ``None`` for a trace, which does not record how many samples a step took."""
        return self.run.samples_per_s if self.run is not None else None

    @property
    def headline(self) -> str:
        """One sentence: the advisor's binding finding, else the largest category of step time."""
        d = self.diagnosis
        if d is not None and d.binding is not None:
            return d.binding.message
        if self.snapshot is not None:
            return snapshot_headline(self.snapshot, self.device_memory_bytes)
        if self.breakdown is None or not self.breakdown.total_step_ns:
            run = self.run
            if run is not None and not run.steps_done and run.error:  # the run's own words on why
                return f"No step was measured (the run ended: {run.error.partition(chr(10))[0]})."
            if run is not None and run.steps_done and run.step_time_ms:  # steps, no trace of them
                return (
                    f"{run.steps_done} steps measured, {run.step_time_ms:.4g} ms per step; "
                    "no trace of them to break the time down."
                )
            return "No step time to attribute."
        cat, share = max(self.breakdown.shares().items(), key=lambda kv: kv[1])
        return f"The largest share of step time is {cat.replace('_', ' ')} ({share:.0%})."

    @property
    def needs_gpu_model(self) -> bool:
        """A GPU trace whose device the peak table does not know: MFU needs the user to name the
        model (never for an accelerator that is not a GPU: no GPU model's peak is its own)."""
        b = self.breakdown
        return (
            b is not None
            and b.device == "gpu"
            and device_peak(b.device_name) is None
            and not is_non_gpu(b.device_name)
        )

    def efficiency_for(self, gpu_model: str | None) -> Efficiency | None:
        """The efficiency against the peak of ``gpu_model`` (the Analysis page's picker, for a trace that does not
        name a device the peak table knows); :attr:`efficiency` itself when no model is named."""
        b = self.breakdown
        if gpu_model is None or b is None or not b.n_steps:
            return self.efficiency
        return efficiency(
            b, self.run.cpu_matmul_tflops if self.run is not None else None, gpu_model
        )

    @property
    def ranking(self) -> Ranking | None:
        """The order to try the fixes in, and the close second (:func:`advisors.ranking.rank`, as ``--json``'s
        ``ranking``)."""
        return rank(self.diagnosis) if self.diagnosis is not None else None

    def bound_of(self, f: Finding) -> Bound | None:
        """The upper bound on what finding ``f``'s fix can gain: the one the JSON, an Apply and a ladder show
        (:func:`advisors.diagnosis.bound_of`)."""
        return bound_of(self.diagnosis, f) if self.diagnosis is not None else None

    def to_json(self) -> dict[str, Any]:
        """The ``analyze --json`` document: facts (the breakdown summary, or a run's own figures when it left no
        trace, or a memory snapshot's summary), the run's facts, the efficiency, the diagnosis (findings with
        their bounds, the fix order, what could not be judged) and, for several ranks, ``job``. StepwiseError
        (the advisor's reason) when the advisor could not judge the input."""
        if self.diagnosis is None:
            raise StepwiseError(self.advisor_note or "the advisor could not judge this input")
        b, run = self.breakdown, self.run
        out = self.summary if b is not None else no_trace_summary(run, self.snapshot, self.notes)
        assert out is not None
        # One step time per input (step_time_ms): a run's own time per step; the profiled window's
        # beside it.
        out["profiled_step_time_ms"] = out["step_time_ms"] if b is not None and b.n_steps else None
        if run is not None and run.step_time_ms is not None:
            out["step_time_ms"] = round(run.step_time_ms, 4)
        if run is not None:
            out["run"] = run_json(run)
        if self.snapshot is not None:
            out["memory_snapshot"] = snapshot_json(self.snapshot, self.device_memory_bytes)
        out["efficiency"] = (
            self.efficiency.to_json() if self.efficiency is not None else dict(NO_EFFICIENCY)
        )
        out.update(diagnosis_json(self.diagnosis))
        if (
            self.job is not None
        ):  # a folder's map and reduce, or a run's agent summaries: every rank's views
            out["job"] = self.job
        out.update(layers_json(self.layers))
        return out


def run_step_basis(steps: int | None, basis: str | None) -> str:
    """What a stored run's time per step is measured over, in words: its count of steps and how they
    were chosen (:mod:`stepwise_agent.steady`); older runs stored neither."""
    if steps is None:
        return "time per step over the run's measured steps after warm-up (profiled steps excluded)"
    plural = "s" if steps != 1 else ""
    if basis in (None, "steady"):
        return (
            f"time per step over the run's {steps} steady step{plural} (elapsed ÷ steps; past "
            "warm-up, not profiled, not next to the profiler's window)"
        )
    return (
        f"time per step over the run's {steps} measured step{plural}, {basis} (the run had too "
        "few steady steps)"
    )


def snapshot_headline(s: MemorySnapshot, device_memory_bytes: int | None) -> str:
    """One sentence for a snapshot that no rule flagged."""
    gib = GIB
    peak = (
        "an unknown peak"
        if s.peak_allocated_bytes is None
        else f"{s.peak_allocated_bytes / gib:.2f} GiB"
    )
    if not device_memory_bytes:
        return (
            f"Memory snapshot: peak live {peak}, {s.reserved_bytes / gib:.2f} GiB reserved. A snapshot does not "
            "record its device's size: state it (--device-memory-gib, or the device memory field) to judge "
            "whether memory binds."
        )
    where = f" on {gib_device(device_memory_bytes)} ({s.reserved_bytes / device_memory_bytes:.0%} of it)"
    return f"Memory snapshot: peak live {peak}, {s.reserved_bytes / gib:.2f} GiB reserved{where}: no memory pressure."
