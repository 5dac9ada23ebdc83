"""``python -m advisors optimize WORKLOAD|SPEC.json [--rounds N] [--size tiny|bench] [--trials K] [--json]`` and
``python -m advisors optimize [--rounds N] [--steps S] [--trials K] [--json] -- python train.py ARGS…``.

One path for both: a sample workload is its own training script (``python -m sample_runs.train WORKLOAD``,
:mod:`cli.workloads`), optimised as a user's script is. A script is never written: each fix changes the script's
own flag when it has one for it, else is injected at boot (:mod:`stepwise_agent.inject`), measured A/B with the
same seeds, and a kept fix is shown as the change to make (``where``, ``change``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from advisors.experiments.experiment import Policy
from advisors.experiments.results.ladder_report import ladder_json, ladder_table
from advisors.experiments.results.outcome import Why, Word
from advisors.experiments.results.recording import ladder_record
from advisors.experiments.results.stored_view import ladder_view, roles
from advisors.experiments.optimize import Ladder, optimize
from advisors.experiments.progress import Progress
from profilers.errors import SpecError
from profilers.run.script_spec import ScriptSpec
from profilers.store import experiments as stored
from profilers.store.runs import RunStore


def add_parser(sub: Any) -> None:
    o = sub.add_parser(
        "optimize",
        help="diagnose, apply fixes, measure them A/B, keep what helps (exit 3: a fix "
        "the trials could not judge, inconclusive)",
    )
    o.add_argument(
        "target",
        nargs="?",
        help="a sample workload's name (an unknown name lists "
        "them) or a SPEC.json; or nothing, and your script after --: -- python train.py ARGS…",
    )
    o.add_argument("--rounds", type=int, default=3, help="diagnose/fix rounds (default 3)")
    o.add_argument(
        "--size", default="tiny", help="workload size preset when TARGET is a name (tiny, bench)"
    )
    o.add_argument(
        "--trials",
        type=int,
        default=Policy.trials,
        help="A/B trials per arm (at least 3; up to --max-trials when pairs were competed for "
        "by other programs or disagree)",
    )
    o.add_argument(
        "--max-trials",
        type=int,
        default=None,
        help=f"at most this many pairs when pairs disagree or were competed for (default "
        f"{Policy.max_trials}; equal to --trials: never more, a time-bounded run that says "
        "inconclusive sooner)",
    )
    o.add_argument(
        "--store", type=Path, help="run store folder (default: $STEPWISE_HOME or ./runs)"
    )
    o.add_argument("--json", action="store_true", help="print the ladder as JSON")
    o.add_argument(
        "--inject",
        action="store_true",
        help="inject every fix into the script, even one it has its "
        "own flag or config line for (by default that flag is what is changed and measured)",
    )
    o.add_argument(
        "--quiet", action="store_true", help="print the table only, not the kept fixes' changes"
    )
    o.add_argument(
        "--cwd",
        metavar="DIR",
        help="the folder your script runs in (default: this one, as in your "
        "shell); relative paths in the command resolve from it",
    )
    o.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps per trial (default: a script's 20, a workload's own run length)",
    )
    o.add_argument(
        "--warmup", type=int, default=3, help="a script's untimed warm-up steps (default 3)"
    )
    o.add_argument(
        "--nproc-per-node", type=int, default=1, help="ranks of a script (torchrun), default 1"
    )
    o.add_argument("--nnodes", type=int, default=1, help="nodes of a multi-node script run")
    o.add_argument("--rdzv-endpoint", help="HOST:PORT of the rendezvous for --nnodes > 1")
    o.add_argument(
        "--check",
        action="store_true",
        help="run each fix's patched command once to show the change, "
        "where it acted and its evidence, without A/B trials or a verdict (exit 0 when every fix ran)",
    )
    o.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="FIX_ID",
        help="try this fix on the script as asked (repeatable) instead of the diagnosis' choice",
    )
    o.add_argument(
        "--timeout", type=float, help="cancel any single trial run after this many seconds"
    )
    from cli.profilers import add_first_step_timeout

    add_first_step_timeout(o)
    from cli import optimize_quality

    optimize_quality.add_arguments(o)
    o.add_argument(
        "--python",
        metavar="PATH",
        help="a script's interpreter (default: the command's python as your "
        "shell finds it on PATH, or the path given)",
    )


EXIT_INCONCLUSIVE = (
    3  # as compare's: the trials could not tell (a busy machine, pairs that disagree)
)


def exit_code(result: dict[str, Any]) -> int:
    """0, or 3 (``compare``'s inconclusive) when any round's outcome word is ``inconclusive``: a fix
    the trials could not judge on this machine, neither kept nor rejected."""
    rounds = result.get("rounds") or []
    unjudged = any(
        r.get("outcome_word") == Word.INCONCLUSIVE and r.get("outcome_why") != Why.CHECKED
        for r in rounds
    )  # a check asked for no verdict: it is not one left open
    return EXIT_INCONCLUSIVE if unjudged else 0


SCRIPT_STEPS = 20  # a script's timed steps per trial when --steps is not given


def load_spec(
    target: str, size: str, store: RunStore, measure_steps: int | None = None, seeded: bool = False
) -> tuple[ScriptSpec, str]:
    """A workload's run (:func:`cli.workloads.workload_spec`) from its name at ``size``, or from a settings file
    (JSON/YAML: ``workload``, its settings and ``params``; a stored run's ``spec.json`` is one); with its name."""
    from cli.workloads import settings_file, workload_spec

    path = Path(target)
    if path.suffix.lower() in (".json", ".yaml", ".yml") or path.is_file():
        workload, size, values, params = settings_file(path)
    else:
        workload, values, params = target, {}, {}
    return workload_spec(
        store.root, workload, size, values, params, measure_steps=measure_steps, seeded=seeded
    ), workload


def policy_of(args: argparse.Namespace) -> Policy:
    """The A/B policy the flags ask for: ``--trials``, ``--max-trials`` (never below the trials asked;
    the default's extension otherwise), ``--check``."""
    most = getattr(args, "max_trials", None)
    return Policy(
        trials=args.trials,
        max_trials=max(Policy.max_trials, args.trials) if most is None else most,
        check=getattr(args, "check", False),
    )


def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.rounds < 1:
        raise SpecError(f"--rounds must be at least 1, got {args.rounds}")
    if args.trials < 3:
        raise SpecError(
            f"--trials must be at least 3 (interleaved A/B needs repeats), got {args.trials}"
        )
    most = getattr(args, "max_trials", None)
    if most is not None and most < args.trials:
        raise SpecError(f"--max-trials ({most}) must be at least --trials ({args.trials})")
    command = getattr(args, "script", None)
    if getattr(args, "to_quality", False):
        return _to_quality(args, command)
    if command:
        if args.target:
            raise SpecError(f"give a workload ({args.target}) or a script after --, not both")
        spec = ScriptSpec(
            command=tuple(command),
            measure_steps=args.steps or SCRIPT_STEPS,
            warmup_steps=args.warmup,
            nproc_per_node=args.nproc_per_node,
            nnodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint,
            python=getattr(args, "python", None),
            cwd=script_cwd(args),
            first_step_timeout_s=_first_step(args),
        )
        return _optimize_script(
            args, spec, spec.name
        )  # spec.name: a missing script is refused before any run
    if not args.target:
        raise SpecError(
            "optimize needs a workload name, a SPEC.json, or a script after --: -- python train.py"
        )
    store = RunStore(args.store)
    spec, name = load_spec(args.target, args.size, store, args.steps)
    return _optimize_script(args, spec.patch(first_step_timeout_s=_first_step(args)), name)


def _first_step(args: argparse.Namespace) -> float | None:
    """``--first-step-timeout`` (its default when a caller's namespace lacks it)."""
    from profilers.run.script_spec import DEFAULT_FIRST_STEP_TIMEOUT_S

    return getattr(args, "first_step_timeout", DEFAULT_FIRST_STEP_TIMEOUT_S)


def _stored(
    store: RunStore, label: str, args: argparse.Namespace, work: Callable[[str], Ladder]
) -> dict[str, Any]:
    """Run the ladder as one stored experiment (its trial runs inside it, hidden from ``profilers list``); the
    JSON adds ``experiment_id``."""
    record = stored.start(
        store, None, "ladder", label, {"rounds": args.rounds, "trials": args.trials}
    )
    try:
        ladder = work(record.run_id)
    except BaseException as err:
        stored.finish(store, record.run_id, None, error=f"{type(err).__name__}: {err}")
        raise
    rec = ladder_record(ladder, args.rounds)  # every number and word of the ladder, decided once
    stored.tag_roles(store, record.run_id, roles(rec.trials))
    stored.finish(store, record.run_id, ladder_view(rec))
    out = ladder_json(ladder, rec)
    out["table"] = ladder_table(ladder, rec)
    out["experiment_id"] = record.run_id
    return out


def _optimize_script(args: argparse.Namespace, spec: ScriptSpec, name: str) -> dict[str, Any]:
    from advisors.experiments.script_strategy import ScriptStrategy
    from advisors.experiments.trials import script_runner

    device = _script_device(list(spec.command), spec.python)
    strategy = ScriptStrategy(
        spec, device, forced=tuple(args.fix), own_knobs=not getattr(args, "inject", False)
    )
    progress = None if args.json else _print_progress
    store = RunStore(args.store)
    return _stored(
        store,
        _ladder_label(args.rounds, name),
        args,
        lambda exp_id: optimize(
            spec,
            script_runner(store, args.timeout, experiment=exp_id),
            rounds=args.rounds,
            policy=policy_of(args),
            device=device,
            on_progress=progress,
            strategy=strategy,
            max_attempts=max(3, len(args.fix)),
        ),
    )


def _to_quality(args: argparse.Namespace, command: list[str] | None) -> dict[str, Any]:
    from cli import optimize_quality
    from profilers.run.script_spec import MAX_STEPS

    if command and args.target:
        raise SpecError(f"give a workload ({args.target}) or a script after --, not both")
    if command:
        spec = ScriptSpec(
            command=tuple(command),
            nproc_per_node=args.nproc_per_node,
            nnodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint,
            python=getattr(args, "python", None),
            cwd=script_cwd(args),
            first_step_timeout_s=_first_step(args),
        )
        spec.name  # a missing script or a bad command is refused here, before any run
        return optimize_quality.main(args, spec)
    if not args.target:
        raise SpecError(
            "optimize --to-quality needs a workload name, a SPEC.json, or a script after --"
        )
    spec, name = load_spec(args.target, args.size, RunStore(args.store), MAX_STEPS, seeded=True)
    return optimize_quality.main(args, spec, workload=name)


def script_cwd(args: argparse.Namespace) -> str:
    """``--cwd`` as an absolute folder (it must exist), else this process's folder: the user's shell's."""
    import os

    cwd = getattr(args, "cwd", None)
    if not cwd:
        return os.getcwd()
    path = Path(cwd).expanduser().resolve()
    if not path.is_dir():
        raise SpecError(f"--cwd {cwd}: no such folder")
    return str(path)


def changes_text(result: dict[str, Any]) -> list[str]:
    """The kept fixes' changes, as the user makes them: the command line, the config file's diff, or the diff of
    their file (a snippet where no single line holds it), one block per kept fix."""
    out: list[str] = []
    for r in result.get("rounds") or []:
        change = r.get("change")
        if not r.get("kept") or not change:
            continue
        where = (
            f" (at {r['where']})"
            if r.get("where") and change.get("kind") not in ("command", "config")
            else ""
        )
        title = {
            "command": "your command line",
            "config": f"your config file {change.get('file')}",
        }.get(str(change.get("kind")), "your code")
        out += [
            "",
            f"{r.get('fix_title') or r.get('fix')}: change {title}{where}",
            *str(change["text"]).rstrip("\n").splitlines(),
        ]
    return out


def _script_device(command: list[str], python: str | None) -> str:
    """Where the script's torch runs: asked of the user's interpreter (an error: line when it has no torch)."""
    from profilers.run import interpreter
    from profilers.run.launch import interpreter_for

    return (
        "cuda"
        if interpreter.probe(interpreter_for(command, python)).get("cuda_available")
        else "cpu"
    )


def _print_progress(event: Progress) -> None:
    if event.waiting and event.step is None:  # a run with no step yet: what its script is doing
        print(f"  {event.waiting}", file=sys.stderr, flush=True)
    elif event.phase == "trial" and event.step is None:
        print(
            f"  round {event.round} · {event.fix} · {event.trial_text}", file=sys.stderr, flush=True
        )
    elif event.phase in ("diagnose", "experiment"):
        what = f"trying {event.fix}" if event.phase == "experiment" else "diagnosing"
        print(f"round {event.round}: {what}", file=sys.stderr, flush=True)


def _ladder_label(rounds: int, name: str) -> str:
    return f"Ladder of {rounds} round{'' if rounds == 1 else 's'} on {name}"
