"""``analyse(path) -> Analysis``: the one entry point that analyses any input, for every surface.

A trace file, folder or zip, a folder of ranks, a memory snapshot, a stored run folder or an upload, or any
kind registered in :mod:`profilers.inputs` (which decides what a path is). The command line (``analyze``,
``--json`` and ``--report``, ``compare``), the dashboard's pages and every report read what it returns.

A folder of two or more rank files is a job: its ranks are read as summaries (map and reduce,
:mod:`advisors.job_observation`), never all their events at once, when it has :data:`SUMMARY_RANKS` ranks or more
or when no chart is wanted (``charts=False``: ``analyze --json``); a smaller one is also loaded whole, for its
timeline. A stored run folder or an upload (folders Stepwise owns) is analysed once and its analysis stored in
it (:mod:`advisors.analysis.stored`); a user's own files are never written to.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from advisors.analysis.document import job_json
from advisors.analysis.layers import SNAPSHOT, run_layers, summaries_layers, trace_layers
from advisors.analysis.value import Analysis
from advisors.diagnosis import diagnose
from advisors.verdict import Diagnosis
from advisors.loader_facts import loader_facts
from advisors.observation import Observation, run_facts, snapshot_observation, with_run_trace
from profilers.efficiency.mfu import Efficiency, efficiency
from profilers.errors import StepwiseError, TraceError
from profilers.frames.telemetry import downsample_telemetry
from profilers.frames.timeline import category_timeline, memory_series, step_spans
from profilers.inputs import InputKind, resolve
from profilers.jobs.agent_summaries import run_job_views
from profilers.store.files import read_json, read_jsonl, steps_frame, telemetry_frame
from profilers.trace.breakdown import Breakdown, breakdown
from profilers.trace.events import Trace
from profilers.trace.memory_snapshot import MemorySnapshot
from profilers.run.step_records import step_rows

if TYPE_CHECKING:
    from profilers.trace.sources import TraceFile

#: A job of this many rank files or more is analysed from its ranks' summaries only (map and reduce): the page
#: never holds every rank's events at once. Under it, the whole trace is loaded too (a timeline, the Events page).
SUMMARY_RANKS = 16


def experiment_folder(p: Path, manifest: dict[str, Any]) -> str:
    """What to say of an experiment's folder given as a run: what it is, its outcome, and its trial runs (each
    of them a run ``analyze`` reads)."""
    from advisors.experiments.results.stored_view import read_view
    from profilers.store import experiments
    from profilers.store.runs import RunStore

    seen = read_view(read_json(p / experiments.VIEW_FILE))
    said = (
        f"its outcome: {seen.label}"
        if seen is not None
        else "it has no stored result (running, or it failed)"
    )
    try:
        trials = [str(Path(t.run_dir)) for t in experiments.trials(RunStore(p.parent), p.name)]
    except (StepwiseError, OSError):
        trials = []
    where = (
        f"; analyze one of its {len(trials)} trial runs, e.g. {trials[-1]}"
        if trials
        else "; it holds no trial run of its own"
    )
    return (
        f"{p.name} is an experiment ({manifest.get('label') or 'Apply or ladder'}), not a run or a trace: "
        f"{said}{where}"
    )


def analyse(
    path: str | Path,
    label: str | None = None,
    *,
    device_memory_bytes: int | None = None,
    engine: str | None = None,
    address: str | None = None,
    charts: bool = True,
    buckets: int | None = None,
    trace: Trace | None = None,
    store: bool = True,
) -> Analysis:
    """Analyse whatever ``path`` is (see the module docs). Raises TraceError/RunError/StepwiseError for an input
    that cannot be read.

    ``label``: the name shown, else the run's (or the upload's) own label from its manifest, else the file name.
    ``device_memory_bytes``: the device total for a memory snapshot (it does not record one). ``engine`` and
    ``address``: where a folder of ranks is mapped (this machine's cores unless ``ray``). ``charts``: compute
    the timeline frames too (a stored analysis always has them). ``trace``: ``path``'s trace when the caller
    already loaded it (the dashboard keeps it for its Events page). ``store``: read and write the analysis
    stored in a run folder or an upload (``False``: compute it afresh, write nothing)."""
    p = Path(path)
    kind, inner, containers = resolve(p)
    manifest = read_json(p / "manifest.json") if containers or kind.name == "run" else None
    manifest = manifest if isinstance(manifest, dict) else {}
    name = label or str(manifest.get("label") or p.name)
    if manifest.get("kind") == "experiment":
        raise StepwiseError(experiment_folder(p, manifest))
    owned = kind.name == "run" or bool(
        containers
    )  # a folder Stepwise wrote: its analysis may be stored in it
    if kind.name == "run":

        def compute() -> Analysis:
            return analyse_run(inner, name, str(manifest.get("kind", "run")), buckets)
    else:

        def compute() -> Analysis:
            return _input(kind, inner, name, engine, address, charts or owned, buckets, trace)

    if owned and store and engine in (None, "local"):
        from advisors.analysis.stored import stored_or_computed

        a = stored_or_computed(p, compute)
        a = a if label is None or a.label == label else replace(a, label=label)
    else:
        a = compute()
    return with_device_memory(a, device_memory_bytes)


def _input(
    kind: InputKind,
    path: Path,
    label: str,
    engine: str | None,
    address: str | None,
    charts: bool,
    buckets: int | None,
    trace: Trace | None,
) -> Analysis:
    """A trace, a folder of ranks or a memory snapshot (no run around it)."""
    from advisors.job_observation import job_files

    files = job_files(path)
    if files is None and engine is not None and engine != "local":
        raise StepwiseError(f"{path}: --engine {engine} reads a folder of two or more rank files")
    if files is not None and trace is None and (not charts or len(files) >= SUMMARY_RANKS):
        return job_analysis(path, label, files, engine, address)
    if trace is None:
        assert kind.read is not None
        raw = kind.read(path)
        if isinstance(raw, MemorySnapshot):
            return snapshot_analysis(raw, label)
        if not isinstance(raw, Trace):
            raise TraceError(
                f"{label}: the {kind.name} reader returned a {type(raw).__name__}, which nothing can "
                "analyse"
            )
        trace = raw
    a = trace_analysis(trace, label, charts, buckets)
    if files is None:
        return a
    # A folder of a few ranks, loaded whole for its timeline: its cross-rank views from the ranks' summaries too,
    # so every door (the page, the report, ``--json``) says the same about its ranks.
    from advisors.job_observation import observe_job

    _, job = observe_job(path, files, engine or "local", address)
    return replace(a, job=job_json(job.views, engine, job.summaries, job.cached))


def trace_analysis(
    trace: Trace, label: str, charts: bool = True, buckets: int | None = None
) -> Analysis:
    """A loaded trace with no run around it (every rank's events at once)."""
    b = breakdown(trace)
    obs = Observation(source=label, breakdown=b, run=None, loader=loader_facts(trace))
    diagnosis, note = judged(obs)
    timeline, spans, memory = _frames(trace, buckets) if charts else (pd.DataFrame(),) * 3
    return Analysis(
        label=label,
        kind="trace",
        breakdown=b,
        run=None,
        diagnosis=diagnosis,
        advisor_note=note,
        efficiency=_efficiency(b, None),
        timeline=timeline,
        step_spans=spans,
        memory=memory,
        steps=steps_frame([]),
        telemetry=pd.DataFrame(),
        n_events=trace.n_events,
        layers=trace_layers(trace, b),
    )


def job_analysis(
    path: str | Path,
    label: str,
    files: list[TraceFile],
    engine: str | None = None,
    address: str | None = None,
) -> Analysis:
    """A folder of rank files from its ranks' summaries (cached in Stepwise's own cache, never beside the traces):
    the breakdown, per-rank table, straggler and diagnosis of loading them all, without a timeline (it is per
    rank: open one rank from the Job page). The map runs on ``engine``."""
    from advisors.job_observation import observe_job

    obs, job = observe_job(path, files, engine or "local", address)
    b = job.breakdown
    diagnosis, note = judged(obs)
    ps = b.per_step
    origin = int(ps["start_ns"].min()) if len(ps) else 0
    spans = pd.DataFrame(
        {
            "rank": ps["rank"].astype(int),
            "step": ps["step"].astype(int),
            "start_ms": (ps["start_ns"] - origin) / 1e6,
            "end_ms": (ps["end_ns"] - origin) / 1e6,
        }
    )
    said = (
        f"read as {len(files)} rank summaries ({job.cached} from the cache), never all ranks' events at once: "
        "the timeline and the events are per rank; open one rank's trace from the Job page"
    )
    return Analysis(
        label=label,
        kind="trace",
        breakdown=b,
        run=None,
        diagnosis=diagnosis,
        advisor_note=note,
        efficiency=_efficiency(b, None),
        timeline=pd.DataFrame(),
        step_spans=spans,
        memory=pd.DataFrame(),
        steps=steps_frame([]),
        telemetry=pd.DataFrame(),
        notes=(said,),
        summarised_ranks=len(files),
        job=job_json(job.views, engine, job.summaries, job.cached),
        layers=summaries_layers(job.module_events),
    )


def snapshot_analysis(
    snapshot: MemorySnapshot, label: str, device_memory_bytes: int | None = None
) -> Analysis:
    """A ``torch.cuda.memory._dump_snapshot`` pickle (read by a class-refusing unpickler): memory facts only."""
    obs = snapshot_observation(snapshot, label, device_memory_bytes)
    diagnosis, note = judged(obs)
    return Analysis(
        label=label,
        kind="trace",
        breakdown=None,
        run=None,
        diagnosis=diagnosis,
        advisor_note=note,
        efficiency=None,
        timeline=pd.DataFrame(),
        step_spans=pd.DataFrame(),
        memory=pd.DataFrame(),
        steps=steps_frame([]),
        telemetry=pd.DataFrame(),
        notes=obs.notes,
        snapshot=obs.snapshot,
        device_memory_bytes=device_memory_bytes,
        layers=SNAPSHOT,
    )


def analyse_run(
    run_dir: Path, label: str, kind: str = "run", buckets: int | None = None
) -> Analysis:
    """A stored run: its facts, steps and telemetry, plus its trace when the profiler exported one, and the
    cross-rank views of the summaries its ranks wrote at capture time if they did."""

    def read(t: Trace) -> tuple[Any, ...]:
        b = breakdown(t)
        return (
            b,
            loader_facts(t),
            _frames(t, buckets),
            t.n_events,
            run_job_views(run_dir, t),
            trace_layers(t, b),
        )

    parts, notes = with_run_trace(run_dir, read)
    empty = (pd.DataFrame(),) * 3
    b, loader, (timeline, spans, memory), n_events, job, traced = (
        parts if parts is not None else (None, None, empty, 0, run_job_views(run_dir), None)
    )
    facts = run_facts(run_dir)
    layers = run_layers(run_dir, traced)
    obs = Observation(
        source=str(run_dir),
        breakdown=b,
        run=facts,
        notes=notes,
        loader=loader,
        job=job,
        layers=layers,
    )
    diagnosis, note = judged(obs)
    return Analysis(
        label=label,
        kind=kind,
        breakdown=b,
        run=facts,
        diagnosis=diagnosis,
        advisor_note=note,
        efficiency=_efficiency(b, facts.cpu_matmul_tflops),
        timeline=timeline,
        step_spans=spans,
        memory=memory,
        steps=steps_frame(step_rows(run_dir)),
        telemetry=downsample_telemetry(telemetry_frame(read_jsonl(run_dir / "telemetry.jsonl"))),
        n_events=n_events,
        notes=notes,
        job=job,
        layers=layers,
    )


def with_device_memory(a: Analysis, device_memory_bytes: int | None) -> Analysis:
    """A snapshot's analysis re-judged against a device total the user states (cheap: no file is read); any
    other analysis as it is."""
    if a.snapshot is None or device_memory_bytes == a.device_memory_bytes:
        return a
    obs = Observation(
        source=a.label,
        breakdown=None,
        run=None,
        notes=a.notes,
        snapshot=a.snapshot,
        device_memory_bytes=device_memory_bytes,
    )
    diagnosis, note = judged(obs)
    return replace(
        a, diagnosis=diagnosis, advisor_note=note, device_memory_bytes=device_memory_bytes
    )


def judged(obs: Observation) -> tuple[Diagnosis | None, str | None]:
    """``(diagnosis, None)``, or ``(None, why)`` when the advisor cannot judge the input."""
    try:
        return diagnose(obs), None
    except StepwiseError as err:
        return None, f"the advisor could not judge this input: {err}"


def _efficiency(b: Breakdown | None, cpu_peak_tflops: float | None) -> Efficiency | None:
    """MFU against the device's peak (``profilers.efficiency.mfu``); None when no step was profiled."""
    return efficiency(b, cpu_peak_tflops) if b is not None and b.n_steps else None


def _frames(trace: Trace, buckets: int | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    kw = {} if buckets is None else {"buckets": buckets}
    return category_timeline(trace, **kw), step_spans(trace), memory_series(trace)
