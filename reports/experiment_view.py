"""A finished experiment or ladder as a stored, JSON-safe *view*: everything the Advisor page shows of it.

The page renders only views (a job that just ended and a result read back after a reload, a closed tab or a
restart go through the same code), so what a user saw once is what every later session sees. Built from the
advisor's values by :mod:`reports.experiment`; stored by :mod:`profilers.store.experiments`.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import orjson

from reports import advice
from reports import experiment as ex

VIEW_SCHEMA = 1


def experiment_view(e: Any, diagnosis: Any = None) -> dict[str, Any]:
    """An applied fix: its verdict and numbers (``reports.experiment.summary``), the diagnosis' upper bound on
    it, every measured step of each arm, the breakdowns and loss curves, and for a script the change to make."""
    s = ex.summary(e)
    return _json_safe({
        "schema": VIEW_SCHEMA, "mode": "apply", "fix": e.fix.title, "fix_id": e.fix.id, "kept": e.kept,
        "reason": e.reason, "summary": {**s, "spec_change": {k: str(v) for k, v in s["spec_change"].items()}},
        "upper_bound": advice.upper_bound(diagnosis, e), "step_samples": ex.step_samples(e),
        "breakdowns": ex.breakdowns(e), "loss_curves": ex.loss_curves(e), "script_change": ex.script_change(e),
    })


def ladder_view(ladder: Any) -> dict[str, Any]:
    """A ladder: the total kept speed-up, the chart's steps, one row per attempted fix, changes and advice."""
    return _json_safe({
        "schema": VIEW_SCHEMA, "mode": "ladder", "total_speedup": ladder.total_speedup,
        "steps": ex.ladder_steps(ladder).to_dict("records"), "rows": ex.ladder_frame(ladder).to_dict("records"),
        "changes": ex.ladder_changes(ladder), "advice": ex.ladder_advice(ladder),
        "not_retried": [{"fix": a.fix.title, "fix_id": a.fix.id, "why": a.why}
                        for a in getattr(ladder, "not_retried", ())],
    })


def experiment_roles(e: Any) -> dict[str, list[str | None]]:
    """Each arm's run folders by the part they played: ``baseline``, ``patched``, ``reference``."""
    arms = {"baseline": e.baseline, "patched": e.patched, "reference": e.reference}
    return {role: [o.run_dir for o in arm.outcomes] for role, arm in arms.items() if arm is not None}


def ladder_roles(ladder: Any) -> dict[str, list[str | None]]:
    """The roles of every rung's runs (a diagnosis run stays a ``trial``)."""
    roles: dict[str, list[str | None]] = {}
    for rung in ladder.rungs:
        for role, dirs in experiment_roles(rung.experiment).items():
            roles.setdefault(role, []).extend(dirs)
    return roles


def _json_safe(value: Mapping[str, Any]) -> dict[str, Any]:
    """Plain JSON types only: NaN/inf become None, numpy and other scalars their Python value."""
    def default(obj: Any) -> Any:
        return str(obj)

    data = orjson.loads(orjson.dumps(_finite(value), default=default,
                                     option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
    assert isinstance(data, dict)
    return data


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
