"""The script's own metric target, as early stopping's target when ``--target`` is not given.

Scripts often say when training is good enough: an argparse flag (``--target_loss 0.55``, ``--early_stop_loss``,
``--target_acc``), a nanoGPT-style global or a config key (``target_loss = 0.55``, Hydra ``train.target_loss``),
or a Lightning ``EarlyStopping(monitor="val_loss", stopping_threshold=0.55)``. They are read from what the agent
recorded of the script's configuration (``injected.json``'s ``config``: :mod:`stepwise_agent.inject.config`) and,
for Lightning's callback (built in code, not configured), from the script's source. Hugging Face's
``metric_for_best_model``/``greater_is_better`` carry no value; ``greater_is_better`` gives the goal when a value
comes from elsewhere. A value that is not a number, or a name that holds a patience, a delta or a count, is not a
target. The target says where it came from ("target 0.55 from the script's --target_loss").
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from advisors.quality.curve import Goal

_NAME = re.compile(
    r"^(target(_\w+)?|\w+_target|early_stop(ping)?_\w+|stop_(at_)?\w+|stopping_threshold)$"
)
_NOT = re.compile(
    r"patience|delta|step|epoch|every|interval|after|seed|dir|path|file|name|mode|size|ratio|frac|count|"
    r"iters?$|steps?$|threshold$"
)
_MAX = re.compile(r"acc|f1|bleu|rouge|score|auc|map\b|iou|reward|precision|recall")
_MIN = re.compile(r"loss|ppl|perplexity|err|wer|cer|mse|mae|rmse")


@dataclass(frozen=True)
class ScriptTarget:
    """A metric target the script carries: its value, its goal when the name tells one, and where it was read."""

    value: float
    goal: Goal | None
    source: str  # "the script's --target_loss", "the script's EarlyStopping(stopping_threshold=…) at train.py:40"

    @property
    def said(self) -> str:
        return f"target {self.value:g} from {self.source}"


def is_target_name(name: str) -> bool:
    """A flag, global or config key that holds a metric target (its last dotted part, without dashes)."""
    key = name.lstrip("-").split(".")[-1].lower().replace("-", "_")
    if key == "stopping_threshold":
        return True
    return bool(_NAME.match(key)) and not _NOT.search(key)


def goal_of(name: str) -> Goal | None:
    key = name.lower()
    return "max" if _MAX.search(key) else "min" if _MIN.search(key) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _config_values(config: Mapping[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(name, value, where) of every option, global and config key the agent recorded."""
    for parser in config.get("parsers") or []:
        for opt in parser.get("options") or []:
            flag = next((f for f in opt.get("flags") or [] if f.startswith("--")), None) or str(
                opt.get("dest")
            )
            yield str(opt.get("dest") or flag), opt.get("value"), f"the script's {flag}"
    for key, value in (config.get("globals") or {}).items():
        yield str(key), value, f"the script's {key} = …"
    for key, value in ((config.get("hydra") or {}).get("values") or {}).items():
        yield str(key), value, f"the script's config {key}"


def _hf_goal(config: Mapping[str, Any]) -> Goal | None:
    """``greater_is_better`` of a Hugging Face ``TrainingArguments`` parsed from the command line."""
    for parser in config.get("parsers") or []:
        for opt in parser.get("options") or []:
            if opt.get("dest") == "greater_is_better" and isinstance(opt.get("value"), bool):
                return "max" if opt["value"] else "min"
    return None


def from_config(config: Mapping[str, Any]) -> ScriptTarget | None:
    """The first metric target in the recorded configuration (``None``: none)."""
    hf = _hf_goal(config)
    for name, value, where in _config_values(config):
        number = _number(value)
        if number is not None and is_target_name(name):
            return ScriptTarget(number, goal_of(name) or hf, where)
    return None


def from_source(path: Path) -> ScriptTarget | None:
    """A Lightning/Keras-style ``EarlyStopping(monitor=…, stopping_threshold=VALUE[, mode=…])`` in the script."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        if not str(func).endswith("EarlyStopping"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        value = kw.get("stopping_threshold")
        number = _number(value.value) if isinstance(value, ast.Constant) else None
        if number is None:
            continue
        mode = kw.get("mode")
        monitor = kw.get("monitor")
        goal: Goal | None = None
        if isinstance(mode, ast.Constant) and mode.value in ("min", "max"):
            goal = "max" if mode.value == "max" else "min"
        elif isinstance(monitor, ast.Constant) and isinstance(monitor.value, str):
            goal = goal_of(monitor.value)
        return ScriptTarget(
            number,
            goal,
            f"the script's EarlyStopping(stopping_threshold=…) at {path.name}:{node.lineno}",
        )
    return None


def of_runs(run_dirs: Sequence[str | None]) -> ScriptTarget | None:
    """The script's own target, from the first run folder whose ``injected.json`` the agent wrote."""
    from profilers.store.files import read_json

    for run_dir in run_dirs:
        data = read_json(Path(run_dir) / "injected.json") if run_dir else None
        if not isinstance(data, dict):
            continue
        config = data.get("config") or {}
        found = from_config(config)
        script = config.get("script")
        if found is None and isinstance(script, str):
            found = from_source(Path(script))
        return found
    return None
