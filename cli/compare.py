"""``python -m advisors compare BASE NEW [--json] [--max-slowdown PCT] [--report OUT.html] [--store DIR]`` and
``python -m advisors compare --save-baseline NAME RUN [--store DIR] [--json]``.

BASE and NEW are anything ``analyze`` takes (a trace, a folder of ranks, a zip, a run folder) or
``baseline:NAME``, a run pinned in the run store. Exit codes: 0 same or improvement; 1 a regression (NEW
slower than BASE beyond ``--max-slowdown`` *and* beyond noise, see :mod:`advisors.compare.regression`); 2 bad input
or usage, as one ``error:`` line on stderr; 3 inconclusive (a change beyond the tolerance that noise, too few
steps or other programs' load leave unproven). ``--save-baseline`` pins RUN (a run id, a run folder of the store,
or a trace, which is imported into the store first) under NAME, once it is known to be comparable.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from advisors.compare.environment import EnvironmentDiff, environment_diff, environment_json
from advisors.compare.regression import DEFAULT_MAX_SLOWDOWN, RegressionCheck, check, check_json
from advisors.compare.sides import observe_side, side_of
from profilers.store import baselines
from profilers.errors import RunError, StepwiseError
from profilers.store.runs import RunStore
from stepwise_agent import steady

MAX_PERCENT = 1000.0
_SINGULAR = {"categories": "category", "kernels": "kernel", "operators": "operator"}


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "compare",
        help="is NEW slower than BASE? a noise-aware verdict for CI (exit 1: slower, 3: inconclusive)",
    )
    c.add_argument(
        "inputs",
        nargs="*",
        metavar="BASE NEW",
        help="two traces, folders of ranks, zips or run folders; baseline:NAME for a pinned run",
    )
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.add_argument(
        "--max-slowdown",
        type=_percent,
        default=DEFAULT_MAX_SLOWDOWN,
        metavar="PCT",
        help=f"tolerated slowdown in percent (default {100 * DEFAULT_MAX_SLOWDOWN:g})",
    )
    c.add_argument(
        "--report", metavar="OUT.html", help="also write the comparison (.html, .json or .md)"
    )
    c.add_argument(
        "--save-baseline", metavar="NAME", help="pin RUN as the baseline NAME (then: baseline:NAME)"
    )
    c.add_argument(
        "--store", type=Path, help="run store folder (default: $STEPWISE_HOME or ./runs)"
    )


def _percent(text: str) -> float:
    try:
        pct = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 <= pct < MAX_PERCENT:
        raise argparse.ArgumentTypeError(
            f"--max-slowdown is a percentage from 0 to {MAX_PERCENT:g}, not {text}"
        )
    return pct / 100


def main(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """The JSON document and the exit code; StepwiseError for bad input (anything unforeseen while reading an
    input is bad input too, said in one line)."""
    if args.save_baseline is not None:
        if len(args.inputs) != 1:
            raise StepwiseError(
                "--save-baseline NAME takes one RUN (a run id, a run folder or a trace)"
            )
        return _save_baseline(args.save_baseline, args.inputs[0], RunStore(args.store)), 0
    if len(args.inputs) != 2:
        raise StepwiseError("compare takes two inputs, BASE and NEW (or --save-baseline NAME RUN)")
    try:
        result, env = _compare(args)
    except (StepwiseError, MemoryError):
        raise
    except (
        Exception
    ) as err:  # not BaseException: KeyboardInterrupt and SystemExit keep their meaning
        detail = " ".join(f"{type(err).__name__}: {err}".split())
        raise StepwiseError(
            f"could not compare {' and '.join(args.inputs)}: {detail[:300]}"
        ) from err
    return {**check_json(result), "environment": environment_json(env)}, result.exit_code


def _compare(args: argparse.Namespace) -> tuple[RegressionCheck, EnvironmentDiff]:
    """The verdict, and what differs between the two inputs' environments (told first)."""
    from advisors.analysis import analyse

    store = (
        RunStore(args.store) if any(i.startswith(baselines.PREFIX) for i in args.inputs) else None
    )
    (base, base_label), (new, new_label) = (_resolve(i, store) for i in args.inputs)
    if args.report:
        return _compare_with_report(
            base, base_label, new, new_label, args.max_slowdown, args.report
        )
    a, b = analyse(base, base_label, charts=False), analyse(new, new_label, charts=False)
    return check(side_of(a), side_of(b), args.max_slowdown), environment_diff(a, b)


def _resolve(text: str, store: RunStore | None) -> tuple[Path, str]:
    """The path an input names and its label: ``baseline:NAME`` → the pinned run's folder."""
    if text.startswith(baselines.PREFIX):
        assert store is not None
        name = text[len(baselines.PREFIX) :]
        return baselines.run_dir(store, name), text
    path = Path(text)
    if not path.exists():
        raise StepwiseError(f"{text}: no such file or folder")
    return path, text


def _compare_with_report(
    base: Path, base_label: str, new: Path, new_label: str, max_slowdown: float, out: str
) -> tuple[RegressionCheck, EnvironmentDiff]:
    """Read each input once for both the verdict and the exported comparison (format from the suffix)."""
    from advisors.analysis import analyse
    from reports.compare import (
        compare,
        regression_check,
    )  # the command line is the outermost layer: it may use reports
    from reports.export import write_comparison

    a, b = analyse(base, label=base_label), analyse(new, label=new_label)
    result = regression_check(a, b, max_slowdown)
    tables = compare(a, b)
    try:
        write_comparison(result, tables, out)
    except ValueError as err:  # an unknown suffix
        raise StepwiseError(str(err)) from None
    except OSError as err:
        raise StepwiseError(f"{out}: cannot write the report ({err.strerror})") from None
    return result, tables.environment


def _save_baseline(name: str, run: str, store: RunStore) -> dict[str, Any]:
    """Pin ``run`` as ``name``: a run of the store as it is, a trace imported into the store first."""
    baselines.check_name(name)
    run_id = _run_id(run, store)
    if run_id is None:
        if not Path(run).exists():
            raise StepwiseError(f"{run}: no such run id, run folder, trace or folder")
        observe_side(run)  # refuse what could never be compared before it is stored
        run_id = store.import_trace(run, label=f"baseline {name}").run_id
    side = observe_side(store.path(run_id), f"{baselines.PREFIX}{name}")
    pinned = baselines.pin(store, name, run_id)
    return {
        "baseline": name,
        "run_id": run_id,
        "run_dir": str(store.path(run_id)),
        "previous": pinned.previous,
        "step_time_ms": round(side.step_time_ms, 4),
        "steps": side.steps,
        "sampled": side.samples.what,
    }


def _run_id(run: str, store: RunStore) -> str | None:
    """The store's run id that ``run`` names (an id, or a run folder inside the store), else None."""
    try:
        if store.path(run).is_dir():
            return run
    except RunError:
        pass
    path = Path(run)
    if (path / "manifest.json").is_file() and path.resolve().parent == store.root.resolve():
        return path.name
    if (path / "manifest.json").is_file():
        raise StepwiseError(
            f"{run} is a run folder of another store ({path.resolve().parent}); "
            f"pass --store {path.resolve().parent}"
        )
    return None


def print_text(result: dict[str, Any]) -> None:
    """The verdict for a person: one line, both sides, what moved most."""
    if "baseline" in result:
        prev = f" (was {result['previous']})" if result["previous"] else ""
        print(
            f"pinned baseline {result['baseline']} = run {result['run_id']}{prev}: time per step "
            f"{result['step_time_ms']:.4g} ms over {result['sampled']}"
        )
        return
    env = result.get("environment") or {}
    if env.get("note"):  # first: a verdict between different machines is not about the code
        print(f"environment: {env['note']}")
    print(f"{result['verdict']}: {result['reason']}")
    for key in ("base", "new"):
        s = result[key]
        typical = steady.typical_note(
            s["step_time_ms"], s.get("typical_step_ms"), s.get("stalled_share")
        )
        beside = f" · {typical}" if typical else ""
        print(
            f"  {key:<4} {s['step_time_ms']:>10.4g} ms/step  {s['sampled']}{beside}"
            f" · bottleneck {s['bottleneck']} · {s['label']}"
        )
    for key in ("base", "new"):
        r = (result.get("ranks") or {}).get(key)
        if r is not None:
            from reports.content.compare import ranks_line  # the outermost layer may use reports

            print(f"  {key:<4} ranks: {ranks_line(r)}")
    for kind, rows in result["movers"].items():
        for m in rows[:3]:
            print(
                f"  moved: {_SINGULAR[kind]:<9} {m['delta_ms']:>+10.4g} ms/step  {m['name'][:100]}"
            )
    for n in result["notes"]:
        print(f"  note: {n}")
