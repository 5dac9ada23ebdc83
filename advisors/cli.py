"""``python -m advisors analyze PATH [--json] [--report OUT.html]``.

Exit codes: 0 analysed; 2 bad input or usage, with one stderr line starting ``error:`` (never a traceback).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

import orjson

from profilers.breakdown import breakdown
from profilers.errors import StepwiseError
from profilers.summary import breakdown_summary
from profilers.trace_load import load_trace


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage + exit 2; keep the one-line contract
        raise StepwiseError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m advisors", description="Why is this PyTorch training slow?")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="break down a trace, a folder of ranks, a zip or a stored run")
    a.add_argument("path")
    a.add_argument("--json", action="store_true", help="print the analysis as JSON")
    a.add_argument("--report", metavar="OUT.html", help="also write a shareable report")
    return p


def analyze(path: str) -> dict[str, Any]:
    b = breakdown(load_trace(path))
    out = breakdown_summary(b)
    out.update({"bottleneck": "unknown", "confidence": 0.0, "findings": []})
    return out


def _print_text(result: dict[str, Any]) -> None:
    print(f"{result['device_name']} · ranks {result['ranks']} · {result['steps']} steps · "
          f"median step {result['step_time_ms']:.2f} ms · bottleneck: {result['bottleneck']}")
    for cat, v in sorted(result["breakdown"].items(), key=lambda kv: -kv[1]["share"]):
        if v["share"] > 0:
            print(f"  {cat:<14} {v['ms']:>10.2f} ms  {100 * v['share']:5.1f}%")
    for w in result["warnings"]:
        print(f"  warning: {w}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        result = analyze(args.path)
    except StepwiseError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: the input needs more memory than this machine has", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _print_text(result)
    return 0
