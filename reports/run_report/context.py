"""What a run's report says beyond its analysis: the experiments tried on it, how to reproduce each arm, and
the environment it ran in — so one report per run is the artefact to paste into a pull request.

:func:`report_extra` is the one function both doors call (``analyze RUN --report`` and the dashboard's Report
page), so a run's report is the same from either.

Read from the store only (nothing re-measured): each experiment's stored view (its outcome word, the measured
gain with its interval, the change: a diff for a script, the spec change for a spec), the run's ``launch.json``
(a script: its command, folder and interpreter) or ``spec.json`` (a workload), and what the run recorded of its
interpreter (``agent.json``: torch and its CUDA build, Python) and device (``result.json``). A value the run did
not record is left out, never filled in from this process.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from advisors.analysis.stored import in_run_store
from advisors.experiments.results.record import ExperimentRecord
from advisors.experiments.results.stored_view import read_view
from profilers.errors import StepwiseError
from profilers.inputs import is_run_folder
from profilers.run.records import RunRecord
from profilers.store import experiments
from profilers.store.files import read_json
from profilers.store.runs import RunStore
from reports.watch_timeline import watch_extra


def _dict(path: Path) -> dict[str, Any]:
    data = read_json(path)
    return data if isinstance(data, dict) else {}


def _shell(argv: list[Any]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def reproduce(run_dir: Path) -> dict[str, str] | None:
    """``{"command": …, "stepwise": …}``: the user's own command (in its folder) and the Stepwise line that
    profiles it again; for a workload run, the ``python -m profilers run`` line. ``None`` for an upload."""
    launch = _dict(run_dir / "launch.json")
    command = launch.get("command")
    if isinstance(command, list) and command:
        cwd = launch.get("cwd")
        own = (f"cd {shlex.quote(str(cwd))} && " if cwd else "") + _shell(command)
        steps = launch.get("steps")
        return {
            "command": own,
            "stepwise": _shell(
                [
                    "python",
                    "-m",
                    "profilers",
                    "launch",
                    *(["--steps", steps] if steps else []),
                    "--",
                    *command,
                ]
            ),
        }
    spec = _dict(run_dir / "spec.json")
    if isinstance(spec.get("workload"), str):
        sets = [
            f"{k}={v}"
            for k, v in sorted(spec.items())
            if k not in ("workload", "params", "steps") and v not in (None, False, 0, "", [], {})
        ]
        size = (
            (spec.get("params") or {}).get("size") if isinstance(spec.get("params"), dict) else None
        )
        line = [
            "python",
            "-m",
            "profilers",
            "run",
            spec["workload"],
            *(["--size", size] if size else []),
            *(["--steps", spec["steps"]] if spec.get("steps") else []),
            *[x for s in sets for x in ("--set", s)],
        ]
        return {"stepwise": _shell(line)}
    return None


def environment(run_dir: Path) -> dict[str, str]:
    """What the run recorded of where it ran: device, torch (version and CUDA build), Python, interpreter,
    host cores. Empty for an upload (a trace records its device only: the report's device card)."""
    agent, launch, result = (
        _dict(run_dir / "agent.json"),
        _dict(run_dir / "launch.json"),
        _dict(run_dir / "result.json"),
    )
    got = {**launch, **agent}
    out: dict[str, str] = {}
    device = result.get("device_name") or got.get("device_name") or result.get("device")
    if device:
        out["device"] = str(device)
    if got.get("torch_version"):
        cuda = got.get("torch_cuda")
        out["torch"] = f"{got['torch_version']} ({'CUDA ' + str(cuda) if cuda else 'CPU build'})"
    if got.get("python_version"):
        out["python"] = str(got["python_version"])
    if got.get("interpreter"):
        out["interpreter"] = str(got["interpreter"])
    if got.get("cpu_count"):
        out["host cores"] = str(got["cpu_count"])
    return out


def _row(**given: Any) -> dict[str, Any]:
    """One experiment row of the report: every key the template reads, ``None`` (or empty) where the
    experiment has no such fact (a ladder has no single diff, site or memory peaks)."""
    row: dict[str, Any] = {
        "label": None,
        "outcome": None,
        "speedup": None,
        "low": None,
        "high": None,
        "trials": None,
        "before": None,
        "after": None,
        "unit": "samples/s",
        "change": None,
        "where": None,
        "spec_change": {},
        "memory": None,
        "commands": None,
    }
    unknown = set(given) - set(row)
    assert not unknown, unknown
    return {**row, **given}


def experiment_rows(store: RunStore, record: RunRecord) -> list[dict[str, Any]]:
    """The finished experiments started from ``record``, newest first, from their stored records: label, outcome
    word (as the Advisor card says it), gain and interval, trials per arm, the change (a diff, or ``knob = value``
    pairs), and each arm's command."""
    rows: list[dict[str, Any]] = []
    base = reproduce(Path(record.run_dir))
    for exp in experiments.of_run(store, record.run_id):
        seen = read_view(experiments.view(store, exp.run_id))
        if seen is None:
            continue
        if seen.ladder is not None:
            lad = seen.ladder
            said = "; ".join(
                f"round {i}: {r.fix_title} {r.outcome_text}" for i, r in enumerate(lad.rounds, 1)
            )
            first, last = (lad.rounds[0], lad.rounds[-1]) if lad.rounds else (None, None)
            rows.append(
                _row(
                    label=exp.label,
                    outcome=f"{lad.label} — {said or lad.why_stopped}",
                    speedup=lad.total_speedup,
                    trials=first.runs_per_arm if first is not None else None,
                    before=first.before_samples_per_s if first is not None else None,
                    after=last.after_samples_per_s if last is not None else None,
                    unit=first.rate_unit if first is not None else "samples/s",
                    commands=base,
                )
            )
            continue
        x = seen.record
        assert x is not None
        rows.append(
            _row(
                label=exp.label,
                outcome=x.outcome_text,
                speedup=x.speedup,
                low=x.low,
                high=x.high,
                trials=x.runs_per_arm,
                before=x.before_samples_per_s,
                after=x.after_samples_per_s,
                unit=x.rate_unit,
                change=x.change_to_make,
                where=x.where,
                spec_change=dict(x.spec_change),
                memory=x.memory_text,
                commands=_arm_commands(store, Path(record.run_dir), base, x),
            )
        )
    return rows


def _arm_commands(
    store: RunStore, run_dir: Path, base: dict[str, str] | None, x: ExperimentRecord
) -> dict[str, str]:
    """Each arm's command, as its trials ran it (their own ``launch.json`` and ``script.json``: their steps, not the
    source run's): ``before`` (the run as it was), ``after`` (with the change), ``measure`` (the A/B again, from
    the command line, with the trials' warm-up and timed steps). A record without trials reads the source run."""
    before_dir, after_dir = (
        _trial_dir(store, x, ("baseline", "reference")),
        _trial_dir(store, x, ("patched",)),
    )
    before = reproduce(before_dir) if before_dir is not None else None
    after = reproduce(after_dir) if after_dir is not None else None
    base = before or base
    if base is None:
        return {}
    ran = after_dir or before_dir or run_dir
    launch = _dict(ran / "launch.json")
    command = launch.get("command") if isinstance(launch.get("command"), list) else None
    out = {"before": base.get("command") or base["stepwise"]}
    if command:
        said = (after or {}).get("command")
        out["after"] = (
            said
            if said and said != out["before"]
            else f"{out['before']}  # after making the change above"
        )
        script = _dict(ran / "script.json")
        own = _dict(before_dir / "launch.json").get("command") if before_dir is not None else None
        timing = [
            *(["--steps", script["measure_steps"]] if script.get("measure_steps") else []),
            *(
                ["--warmup", script["warmup_steps"]]
                if script.get("warmup_steps") is not None
                else []
            ),
            *(["--cwd", launch["cwd"]] if launch.get("cwd") else []),
        ]
        out["measure"] = _shell(
            [
                "python",
                "-m",
                "advisors",
                "optimize",
                *(["--fix", x.fix_id] if x.fix_id else []),
                *(["--trials", x.trials_per_arm] if x.trials_per_arm else []),
                *timing,
                "--",
                *(own if isinstance(own, list) and own else command),
            ]
        )
    else:
        out["after"] = base["stepwise"] + "".join(
            f" --set {shlex.quote(f'{k}={v}')}" for k, v in x.spec_change.items()
        )
    return out


def _trial_dir(store: RunStore, x: ExperimentRecord, roles: tuple[str, ...]) -> Path | None:
    """The folder of the experiment's first trial of one of ``roles`` still in the store, else None."""
    for t in x.trials:
        if t.role in roles and t.run_id:
            try:
                return Path(store.get(t.run_id).run_dir)
            except StepwiseError:  # deleted since: the next one, else the source run
                continue
    return None


def report_extra(path: Path, store: RunStore | None = None) -> dict[str, Any]:
    """``{"reproduce", "environment", "experiments", "watch"}`` of the input at ``path``, for
    :func:`reports.export.render`'s ``extra``: for a run folder, how to reproduce it, its environment and the
    experiments tried on it (from ``store``, else the run store the folder is in, if it is in one); for anything
    else (a trace, a folder of ranks), nothing. Read from the files only: the same whichever door asks."""
    if not is_run_folder(path):
        return {"reproduce": None, "environment": {}, "experiments": [], "watch": None}
    store = store if store is not None else _store_of(path)
    record = None
    if store is not None:
        try:
            record = store.get(path.name)
        except StepwiseError:
            record = None
    return {
        "reproduce": reproduce(path),
        "environment": environment(path),
        "experiments": experiment_rows(store, record)
        if store is not None and record is not None
        else [],
        "watch": watch_extra(path),
    }  # a watched run's timeline: its captures and the whole run's points


def _store_of(run_dir: Path) -> RunStore | None:
    """The run store ``run_dir`` is a folder of (:func:`advisors.analysis.stored.in_run_store`), opened as it is;
    None for a run folder on its own (nothing is created beside it)."""
    if not in_run_store(run_dir):
        return None
    try:
        return RunStore(run_dir.resolve().parent)
    except (OSError, StepwiseError):
        return None
