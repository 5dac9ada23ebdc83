"""``python -m advisors optimize WORKLOAD|SPEC.json [--rounds N] [--size tiny|bench] [--trials K] [--json]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from advisors.experiment import Policy
from advisors.ladder_report import ladder_json, ladder_table
from advisors.optimize import optimize
from advisors.trials import store_runner
from profilers.errors import SpecError
from profilers.spec import TrainingSpec
from profilers.store import RunStore


def add_parser(sub: Any) -> None:
    o = sub.add_parser("optimize", help="diagnose, apply fixes, measure them A/B, keep what helps")
    o.add_argument("target", help="a workload name (see `python -m profilers list-workloads`) or a SPEC.json")
    o.add_argument("--rounds", type=int, default=3, help="diagnose/fix rounds (default 3)")
    o.add_argument("--size", default="tiny", help="workload size preset when TARGET is a name (tiny, bench)")
    o.add_argument("--trials", type=int, default=Policy.trials, help="A/B trials per arm (at least 3)")
    o.add_argument("--store", type=Path, help="run store folder (default: $STEPWISE_HOME or ./runs)")
    o.add_argument("--json", action="store_true", help="print the ladder as JSON")


def load_spec(target: str, size: str) -> TrainingSpec:
    """A spec from a JSON/YAML file, or a registered workload's recommended spec at ``size``."""
    path = Path(target)
    if path.suffix.lower() in (".json", ".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise SpecError(f"{target}: no such spec file")
        text = path.read_text(encoding="utf-8")
        return TrainingSpec.from_yaml(text) if path.suffix.lower() in (".yaml", ".yml") else \
            TrainingSpec.from_json(text)
    from sample_runs import get_workload

    return get_workload(target).spec(size)


def run_device(spec: TrainingSpec) -> str:
    if spec.device != "auto":
        return spec.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.rounds < 1:
        raise SpecError(f"--rounds must be at least 1, got {args.rounds}")
    if args.trials < 3:
        raise SpecError(f"--trials must be at least 3 (interleaved A/B needs repeats), got {args.trials}")
    spec = load_spec(args.target, args.size)
    store = RunStore(args.store)
    progress = None if args.json else _print_progress
    ladder = optimize(spec, store_runner(store), rounds=args.rounds, policy=Policy(trials=args.trials),
                      device=run_device(spec), on_progress=progress)
    out = ladder_json(ladder)
    out["table"] = ladder_table(ladder)
    return out


def _print_progress(event: dict[str, Any]) -> None:
    if event.get("phase") == "trial" and event.get("run") == {}:
        print(f"  round {event.get('round')} · {event.get('fix')} · {event['arm']} trial {event['trial']}/"
              f"{event['trials']}", file=sys.stderr, flush=True)
    elif event.get("phase") in ("diagnose", "experiment"):
        what = f"trying {event['fix']}" if event["phase"] == "experiment" else "diagnosing"
        print(f"round {event.get('round')}: {what}", file=sys.stderr, flush=True)
