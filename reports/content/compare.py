"""What a comparison export says, as plain values: the gate's verdict and reason, both sides, what moved.

The context the comparison templates render and the JSON export; like :mod:`reports.content`, strings stay
raw here (escaping is the template's job). The JSON export is ``compare --json`` plus the samples and the
full delta tables, so a tool reading it needs no second format.
"""

from __future__ import annotations

import math
import time
from typing import Any

from advisors.compare.environment import environment_json
from advisors.compare.regression import RegressionCheck, check_json
from reports.compare import Comparison

COMPARISON_SCHEMA = 1
VERDICT_COLORS = {
    "regression": "#E45756",
    "improvement": "#54A24B",
    "same": "#4C78A8",
    "inconclusive": "#F58518",
}
VERDICT_WORDS = {  # what each verdict means, said beside it in the exports
    "regression": "NEW is slower beyond the tolerance and beyond noise",
    "improvement": "NEW is faster beyond the tolerance and beyond noise",
    "same": "NEW is within the tolerance of BASE",
    "inconclusive": "the change cannot be told from noise or from other programs' load: neither slower nor the "
    "same can be said",
}


def comparison_context(c: RegressionCheck, tables: Comparison) -> dict[str, Any]:
    """Everything the HTML and Markdown comparison templates show."""
    doc = check_json(c)
    return {
        **doc,
        "label": f"{c.base.label} → {c.new.label}",
        "environment": environment_json(tables.environment),
        "color": VERDICT_COLORS[c.verdict],
        "verdict_words": VERDICT_WORDS[c.verdict],
        "percent": round(100 * c.max_slowdown, 4),
        "categories": [
            {k: _num(v) for k, v in r.items()}
            for r in tables.categories.to_dict("records")
            if r["a_ms"] or r["b_ms"]
        ],
        "kernels": _records(tables.kernels),
        "ops": _records(tables.ops),
        "rank_rows": [
            {"side": key.upper(), "line": ranks_line(r)}
            for key in ("base", "new")
            if (r := doc["ranks"][key]) is not None
        ],
    }


def ranks_line(r: dict[str, Any]) -> str:
    """One side's ranks (``compare``'s ``ranks``) in one line: how many, the straggler (or that none stands out of
    the noise), its critical path's two largest kinds in words; the command line's text and the reports say it
    alike."""
    from profilers.jobs.critical_graph import KIND_WORDS

    parts = [
        f"{r['ranks']}"
        + (f" ({len(r['traced_ranks'])} traced)" if r.get("traced_ranks") is not None else "")
    ]
    s = r.get("straggler")
    if s is not None:
        parts.append(
            f"straggler rank {s['culprit']} ({s['work_ms']:.4g} ms of work, median {s['median_work_ms']:.4g})"
        )
    elif r.get("straggler_reason"):
        parts.append("no straggler beyond the noise")
    cp = r.get("critical_path")
    if cp is not None:
        top = sorted(cp["by_kind"].items(), key=lambda kv: -kv[1])[:2]
        parts.append(
            f"rank {cp['rank']}'s critical path {cp['total_ms']:.4g} ms ("
            + ", ".join(f"{KIND_WORDS.get(k, k)} {v:.4g}" for k, v in top)
            + ")"
        )
    return " · ".join(parts)


def comparison_json(c: RegressionCheck, tables: Comparison) -> dict[str, Any]:
    """The JSON export: the ``compare --json`` fields, each side's step samples and the delta tables."""
    return {
        "stepwise_comparison": COMPARISON_SCHEMA,
        "generated_unix": round(time.time(), 3),
        **check_json(c),
        "environment": environment_json(tables.environment),
        "step_ms": {
            "base": [round(v, 4) for v in c.base.samples.ms],
            "new": [round(v, 4) for v in c.new.samples.ms],
        },
        "tables": {
            "categories": [
                {k: _num(v) for k, v in r.items()} for r in tables.categories.to_dict("records")
            ],
            "kernels": _records(tables.kernels),
            "ops": _records(tables.ops),
        },
    }


def _num(v: Any, nd: int = 4) -> Any:
    if isinstance(v, float):
        return round(v, nd) if math.isfinite(v) else None
    return v


def _records(table: Any) -> list[dict[str, Any]]:
    return [{k: _num(v) for k, v in r.items()} for r in table.to_dict("records")]
