"""``Analysis``: everything a dashboard page or a report shows about one trace or stored run — small and picklable.

Built once per input (the dashboard caches it): the breakdown and its JSON summary, a downsampled timeline and
memory series, the run's step metrics and downsampled telemetry when it is a stored run, and the advisor's
diagnosis (or the reason there is none). Never the raw events: a 100 MB trace becomes a few hundred rows.

``analyse_path(path)`` is the one entry point for a trace file, folder or zip, a stored run folder or an
upload, or any kind registered in :mod:`profilers.inputs` (which decides what a path is); the command line
(``advisors analyze --report``) and the dashboard both use it. A memory snapshot pickle gets an analysis
with no breakdown and its :class:`~profilers.trace.memory_snapshot.MemorySnapshot` summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from advisors.verdict import Diagnosis
from advisors.loader_facts import loader_facts
from advisors.observation import Observation, RunFacts, run_facts, snapshot_observation, with_run_trace
from profilers.errors import TraceError
from profilers.inputs import RunFolder, resolve
from profilers.jobs.agent_summaries import is_run_views, run_job_views
from profilers.trace.breakdown import Breakdown, breakdown
from profilers.trace.events import Trace
from profilers.efficiency.mfu import efficiency
from profilers.efficiency.peaks import device_peak
from profilers.trace.memory_snapshot import GIB, MemorySnapshot, gib_device
from profilers.store.files import read_json, read_jsonl, steps_frame, telemetry_frame
from profilers.trace.summary import breakdown_summary
from reports import advice
from profilers.frames.timeline import category_timeline, memory_series, step_spans
from profilers.frames.telemetry import downsample_telemetry

if TYPE_CHECKING:
    from profilers.jobs.reduce import JobAnalysis


@dataclass(frozen=True)
class Analysis:
    """One analysed input. ``breakdown`` is ``None`` for a run that left no readable trace (see ``notes``).

    Frames (all small): ``timeline`` and ``step_spans`` (:mod:`profilers.frames.timeline`), ``memory``
    (:func:`profilers.frames.timeline.memory_series`), ``steps`` (a run's ``steps.jsonl``: rank, step, wall_ms, loss,
    samples, profiled, t_unix_ns) and ``telemetry`` (:func:`profilers.frames.telemetry.downsample_telemetry`).
    """

    label: str
    kind: str  # "trace" (a path or an upload) | "run" | "launch"
    breakdown: Breakdown | None
    summary: dict[str, Any] | None
    timeline: pd.DataFrame
    step_spans: pd.DataFrame
    memory: pd.DataFrame
    run: RunFacts | None
    steps: pd.DataFrame
    telemetry: pd.DataFrame
    diagnosis: Diagnosis | None
    advisor_note: str | None  # why ``diagnosis`` is None
    n_events: int = 0
    notes: tuple[str, ...] = field(default=())
    snapshot: MemorySnapshot | None = None  # a memory snapshot's summary (then there is no breakdown)
    device_memory_bytes: int | None = None  # the device total the user stated, for a snapshot
    summarised_ranks: int = 0  # read from this many ranks' summaries (job_analysis): no event was loaded
    # A run whose ranks wrote summaries at capture time (``--trace-ranks``): the cross-rank views of all N ranks
    # (profilers.jobs.agent_summaries.run_job_views, the ``job`` of ``analyze --json``), where the breakdown
    # holds only the k ranks that kept a trace.
    job: dict[str, Any] | None = None

    @property
    def n_ranks(self) -> int:
        """How many ranks the input has: a ``--trace-ranks`` run's every rank that wrote a summary, not only the
        ranks that kept a trace (the breakdown's); the one count the page and the report show."""
        if is_run_views(self.job):
            return len(self.job["ranks"])
        return len(self.breakdown.ranks) if self.breakdown is not None else 0

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.breakdown.warnings if self.breakdown is not None else ()

    @property
    def step_time_ms(self) -> float | None:
        """The run's one step time, the same on every page and in every report: a stored run's median measured
        step after warm-up (its ``result.json``, what the run list shows); an uploaded trace's median profiled
        step. ``None`` when nothing was timed."""
        if self.run is not None and self.run.step_time_ms is not None:
            return self.run.step_time_ms
        return self.profiled_step_time_ms

    @property
    def profiled_step_time_ms(self) -> float | None:
        """The profiled window's own median step (the trace's steps, profiler overhead included)."""
        return self.breakdown.step_time_ms if self.breakdown is not None and self.breakdown.n_steps else None

    @property
    def step_time_basis(self) -> str:
        """What :attr:`step_time_ms` is the median of, in words (a tooltip, a report's footnote)."""
        if self.run is not None and self.run.step_time_ms is not None:
            return run_step_basis(self.run.step_time_steps, self.run.step_time_basis)
        return "median profiled step of the trace"

    @property
    def headline(self) -> str:
        """One sentence: the advisor's binding finding, else the largest category of step time."""
        d = self.diagnosis
        if d is not None and d.binding is not None:
            return d.binding.message
        if self.snapshot is not None:
            return snapshot_headline(self.snapshot, self.device_memory_bytes)
        if self.breakdown is None or not self.breakdown.total_step_ns:
            return "No step time to attribute."
        cat, share = max(self.breakdown.shares().items(), key=lambda kv: kv[1])
        return f"The largest share of step time is {cat.replace('_', ' ')} ({share:.0%})."


def run_step_basis(steps: int | None, basis: str | None) -> str:
    """What a stored run's step time is the median of, in words: its count of steps and how they were chosen
    (:mod:`stepwise_agent.steady`); older runs stored neither."""
    if steps is None:
        return "median measured step of the run after warm-up (profiled steps excluded)"
    plural = "s" if steps != 1 else ""
    if basis in (None, "steady"):
        return (f"median of the run's {steps} steady step{plural} (past warm-up, not profiled, not next to the "
                "profiler's window)")
    return f"median of the run's {steps} measured step{plural}, {basis} (the run had too few steady steps)"


def analyse_path(path: str | Path, label: str | None = None, buckets: int | None = None,
                 device_memory_bytes: int | None = None) -> Analysis:
    """Analyse a trace (file, folder of ranks, zip), a memory snapshot, a stored run folder or an upload. Raises
    TraceError for a bad trace. ``device_memory_bytes`` is the device total for a snapshot (it does not record one).

    The label is ``label``, else the run's (or the upload's) own label from its manifest, else the file name."""
    p = Path(path)
    kind, inner, containers = resolve(p)
    manifest = read_json(p / "manifest.json") if containers or kind.name == "run" else None
    manifest = manifest if isinstance(manifest, dict) else {}
    name = label or str(manifest.get("label") or p.name)
    assert kind.read is not None
    raw = kind.read(inner)
    if isinstance(raw, RunFolder):
        return analyse_run(raw.path, name, str(manifest.get("kind", "run")), buckets)
    if isinstance(raw, Trace):
        return trace_analysis(raw, name, buckets)
    if isinstance(raw, MemorySnapshot):
        return snapshot_analysis(raw, name, device_memory_bytes)
    raise TraceError(f"{name}: the {kind.name} reader returned a {type(raw).__name__}, which nothing can analyse")


def analyse_trace(path: Path, label: str, buckets: int | None = None,
                  device_memory_bytes: int | None = None, trace: Trace | None = None) -> Analysis:
    """An upload or a file on disk under the label the caller gives it (whatever kind it is). ``trace``: the
    trace of ``path`` when the caller already loaded it (the dashboard keeps it for its Events page), so it is
    not parsed twice."""
    if trace is not None:
        return trace_analysis(trace, label, buckets)
    return analyse_path(path, label, buckets, device_memory_bytes)


def trace_analysis(trace: Trace, label: str, buckets: int | None = None) -> Analysis:
    """A trace with no run around it."""
    b = breakdown(trace)
    obs = Observation(source=label, breakdown=b, run=None, loader=loader_facts(trace))
    diagnosis, note = advice.diagnose(obs)
    kw = {} if buckets is None else {"buckets": buckets}
    return Analysis(label=label, kind="trace", breakdown=b, summary=breakdown_summary(b),
                    timeline=category_timeline(trace, **kw), step_spans=step_spans(trace),
                    memory=memory_series(trace), run=None, steps=_empty_steps(), telemetry=pd.DataFrame(),
                    diagnosis=diagnosis, advisor_note=note, n_events=trace.n_events)


#: A job of this many rank files or more is analysed from its ranks' summaries (map and reduce): the page never
#: holds every rank's events at once. Under it, the whole trace is loaded (a timeline, the Events page).
SUMMARY_RANKS = 16


def job_analysis(path: str | Path, label: str, engine: str = "local", address: str | None = None,
                 observed: tuple[Observation, JobAnalysis] | None = None) -> Analysis | None:
    """A folder of :data:`SUMMARY_RANKS` or more rank files analysed from the ranks' summaries (cached beside
    the traces): the breakdown, per-rank table, straggler and diagnosis of loading them all, without a
    timeline (it is per rank: open one rank from the Job page). ``None`` for anything else. The map runs on
    ``engine``; ``observed``: the folder's :func:`~advisors.job_observation.observe_job` when the caller has it
    (``analyze --report`` uses the same one for its JSON)."""
    from advisors.job_observation import job_files, observe_job

    files = job_files(path)
    if files is None or len(files) < SUMMARY_RANKS:
        return None
    obs, job = observed or observe_job(path, files, engine, address)
    b = job.breakdown
    diagnosis, note = advice.diagnose(obs)
    ps = b.per_step
    origin = int(ps["start_ns"].min()) if len(ps) else 0
    spans = pd.DataFrame({"rank": ps["rank"].astype(int), "step": ps["step"].astype(int),
                          "start_ms": (ps["start_ns"] - origin) / 1e6, "end_ms": (ps["end_ns"] - origin) / 1e6})
    said = (f"read as {len(files)} rank summaries ({job.cached} from the cache), never all ranks' events at once: "
            "the timeline and the events are per rank; open one rank's trace from the Job page")
    return Analysis(label=label, kind="trace", breakdown=b, summary=breakdown_summary(b), timeline=pd.DataFrame(),
                    step_spans=spans, memory=pd.DataFrame(), run=None, steps=_empty_steps(),
                    telemetry=pd.DataFrame(), diagnosis=diagnosis, advisor_note=note, notes=(said,),
                    summarised_ranks=len(files))


def snapshot_analysis(snapshot: MemorySnapshot, label: str, device_memory_bytes: int | None = None) -> Analysis:
    """A ``torch.cuda.memory._dump_snapshot`` pickle (read by a class-refusing unpickler): memory facts only."""
    obs = snapshot_observation(snapshot, label, device_memory_bytes)
    diagnosis, note = advice.diagnose(obs)
    return Analysis(label=label, kind="trace", breakdown=None, summary=None, timeline=pd.DataFrame(),
                    step_spans=pd.DataFrame(), memory=pd.DataFrame(), run=None, steps=_empty_steps(),
                    telemetry=pd.DataFrame(), diagnosis=diagnosis, advisor_note=note, notes=obs.notes,
                    snapshot=obs.snapshot, device_memory_bytes=device_memory_bytes)


def with_device_memory(a: Analysis, device_memory_bytes: int | None) -> Analysis:
    """A snapshot's analysis re-judged against a device total the user states (cheap: no file is read)."""
    if a.snapshot is None or device_memory_bytes == a.device_memory_bytes:
        return a
    obs = Observation(source=a.label, breakdown=None, run=None, notes=a.notes, snapshot=a.snapshot,
                      device_memory_bytes=device_memory_bytes)
    diagnosis, note = advice.diagnose(obs)
    return replace(a, diagnosis=diagnosis, advisor_note=note, device_memory_bytes=device_memory_bytes)


def snapshot_headline(s: MemorySnapshot, device_memory_bytes: int | None) -> str:
    """One sentence for a snapshot that no rule flagged."""
    gib = GIB
    peak = "an unknown peak" if s.peak_allocated_bytes is None else f"{s.peak_allocated_bytes / gib:.2f} GiB"
    if not device_memory_bytes:
        return (f"Memory snapshot: peak live {peak}, {s.reserved_bytes / gib:.2f} GiB reserved. A snapshot does not "
                "record its device's size: state it (--device-memory-gib, or the device memory field) to judge "
                "whether memory binds.")
    where = f" on {gib_device(device_memory_bytes)} ({s.reserved_bytes / device_memory_bytes:.0%} of it)"
    return f"Memory snapshot: peak live {peak}, {s.reserved_bytes / gib:.2f} GiB reserved{where}: no memory pressure."



def analyse_run(run_dir: Path, label: str, kind: str = "run", buckets: int | None = None) -> Analysis:
    """A stored run: its facts, steps and telemetry, plus its trace when the profiler exported one."""
    kw = {} if buckets is None else {"buckets": buckets}
    parts, notes = with_run_trace(run_dir, lambda t: (
        breakdown(t), loader_facts(t), category_timeline(t, **kw), step_spans(t), memory_series(t), t.n_events,
        run_job_views(run_dir, t)))
    b, loader, timeline, spans, memory, n_events, job = parts if parts is not None else (
        None, None, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), 0, run_job_views(run_dir))
    facts = run_facts(run_dir)
    obs = Observation(source=label, breakdown=b, run=facts, notes=notes, loader=loader, job=job)
    diagnosis, note = advice.diagnose(obs)
    return Analysis(label=label, kind=kind, breakdown=b, summary=breakdown_summary(b) if b else None,
                    timeline=timeline, step_spans=spans, memory=memory, run=facts,
                    steps=steps_frame(read_jsonl(run_dir / "steps.jsonl")),
                    telemetry=downsample_telemetry(telemetry_frame(read_jsonl(run_dir / "telemetry.jsonl"))),
                    diagnosis=diagnosis, advisor_note=note, n_events=n_events, notes=notes, job=job)


def _empty_steps() -> pd.DataFrame:
    return steps_frame([])


def efficiency_phrase(a: Analysis, gpu_model: str | None = None) -> str | None:
    """The MFU sentence of a trace's analysis (``None``: nothing to measure), against the peak of ``gpu_model``
    when the trace does not name a device the peak table knows (the Analysis page's picker)."""
    b = a.breakdown
    if b is None or not b.n_steps:
        return None
    cpu_peak = a.run.cpu_matmul_tflops if a.run is not None else None
    return efficiency(b, cpu_peak, gpu_model).phrase()


def needs_gpu_model(a: Analysis) -> bool:
    """A GPU trace whose device the peak table does not know: MFU needs the user to name the model."""
    b = a.breakdown
    return b is not None and b.device == "gpu" and device_peak(b.device_name) is None
