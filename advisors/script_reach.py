"""Where a script's configured values end up, read from its source (AST, nothing run): which names reach a
``DataLoader``'s ``num_workers``, an autocast, a ``torch.compile`` call, an optimizer.

Two readings: :func:`reaches` for a plain script (``args.workers`` in ``DataLoader(num_workers=args.workers)``:
``workers``), and :func:`lightning_reaches` for a ``LightningCLI(Model, DataModule)`` script, where an option
``--data.num_workers`` is the data module's ``__init__`` parameter: it reaches a call only through that class —
stored (``self.workers = num_workers``, or ``self.save_hyperparameters()`` then ``self.hparams.num_workers``) and
passed by one of its methods (``DataLoader(..., num_workers=self.hparams.num_workers)``). The analyst maps a fix
to a flag by its name *and* by this (:mod:`advisors.fixes.conventions`), never by its name alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: the calls whose arguments are followed (see :func:`reaches`)
WHERE = (
    "dataloader",
    "autocast",
    "compile",
    "optimizer",
    "precision",
    "trainer",
    "batch",
    "lr",
    "accumulate",
    "checkpoint",
    "no_sync",
)


def reaches(file: str) -> dict[str, set[str]]:
    """Which attribute names (``args.workers`` -> ``workers``) reach which call in ``file``: ``dataloader`` (a
    ``DataLoader``'s ``num_workers``), ``autocast`` (an autocast's arguments), ``compile`` (a ``torch.compile``
    call's arguments, or the test of an ``if`` whose body calls it), ``optimizer`` (an ``optim.*`` call's),
    ``batch`` (a ``DataLoader``'s ``batch_size``), ``lr`` (an ``optim.*`` call's ``lr``, keyword or second), the test
    of an ``if`` whose body steps an optimizer (``accumulate``: ``if (i + 1) % args.accum == 0: opt.step()``), calls a
    checkpointing function (``checkpoint``) or enters ``no_sync()`` (``no_sync``), and,
    as a config's dotted key (``cfg.trainer.precision`` -> ``trainer.precision``), ``precision`` (a
    ``Trainer``'s ``precision=``) and ``trainer`` (what a ``Trainer(**…)`` unpacks)."""
    tree = _parse(file)
    out: dict[str, set[str]] = {where: set() for where in WHERE}
    if tree is None:
        return out
    held = _assigned(tree)
    for where, exprs in sinks(tree).items():
        for x in exprs:
            out[where] |= (
                {_path(x)} if where in ("precision", "trainer") else _through(_attrs(x), held)
            )
    return out


def reach_line(file: str, where: str, name: str) -> int | None:
    """The first line of ``file`` whose expression carries ``name`` to the call ``where`` (see :func:`reaches`):
    llm.c's ``ctx = torch.amp.autocast(..., dtype=ptdtype)`` for ``dtype`` and ``autocast``, the line a change of
    that flag acts on (``None`` when none does)."""
    tree = _parse(file)
    if tree is None:
        return None
    held = _assigned(tree)
    lines = [x.lineno for x in sinks(tree).get(where, []) if name in _through(_attrs(x), held)]
    return min(lines) if lines else None


def _assigned(tree: ast.AST) -> dict[str, set[str]]:
    """``name -> the names its value is computed from``, for each plain ``name = expr`` in ``tree``: llm.c's
    ``ptdtype = {...}[args.dtype]`` makes ``dtype`` reach the autocast that takes ``dtype=ptdtype``."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            out.setdefault(node.targets[0].id, set()).update(_attrs(node.value))
    return out


def _through(names: set[str], held: dict[str, set[str]], depth: int = 3) -> set[str]:
    """``names`` and, ``depth`` assignments back, the names their values were computed from."""
    seen, frontier = set(names), set(names)
    for _ in range(depth):
        frontier = {m for n in frontier for m in held.get(n, ())} - seen
        if not frontier:
            break
        seen |= frontier
    return seen


def sinks(tree: ast.AST) -> dict[str, list[ast.expr]]:
    """The expressions under ``tree`` whose value reaches each call of :data:`WHERE`."""
    out: dict[str, list[ast.expr]] = {where: [] for where in WHERE}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node.func)
            everything = [*node.args, *(k.value for k in node.keywords)]
            if name == "DataLoader":
                out["dataloader"] += [k.value for k in node.keywords if k.arg == "num_workers"]
                out["batch"] += _argument(node, "batch_size", 1)
            elif name in ("autocast", "amp_autocast"):
                out["autocast"] += everything
            elif (
                name == "Trainer"
            ):  # Lightning's: precision=cfg.trainer.precision, or **cfg.trainer
                out["precision"] += [k.value for k in node.keywords if k.arg == "precision"]
                out["trainer"] += [k.value for k in node.keywords if k.arg is None]
            elif name == "compile":
                out["compile"] += everything
            elif isinstance(node.func, ast.Attribute) and _dotted(node.func).startswith(
                ("torch.optim.", "optim.")
            ):
                out["optimizer"] += everything
                out["lr"] += _argument(node, "lr", 1)
        elif isinstance(node, (ast.If, ast.IfExp)):
            body = node.body if isinstance(node.body, list) else [node.body]
            calls = {
                _call_name(c.func) for b in body for c in ast.walk(b) if isinstance(c, ast.Call)
            }
            for where, called in (
                ("compile", "compile"),
                ("autocast", "autocast"),
                ("accumulate", "step"),
                ("no_sync", "no_sync"),
            ):
                if called in calls:
                    out[where].append(node.test)
            if any("checkpoint" in c.lower() for c in calls):
                out["checkpoint"].append(node.test)
    return out


def lightning_reaches(file: str) -> dict[str, dict[str, set[str]]]:
    """``LightningCLI(Model, DataModule)`` in ``file``: for its ``model`` and ``data`` sections, which ``__init__``
    parameters of that class (defined in ``file``) reach which call of :data:`WHERE` — through the class's own
    attributes (``self.x = x``, ``self.hparams.x`` after ``self.save_hyperparameters()``), or directly within
    ``__init__``. A class given by any other means (imported, ``--model=Class``) reaches nothing here."""
    tree = _parse(file)
    if tree is None:
        return {}
    classes = {c.name: c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    out: dict[str, dict[str, set[str]]] = {}
    for call in (
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and _call_name(n.func) == "LightningCLI"
    ):
        for section, keyword, index in (
            ("model", "model_class", 0),
            ("data", "datamodule_class", 1),
        ):
            given = _argument(call, keyword, index)
            if given and isinstance(given[0], ast.Name) and given[0].id in classes:
                out[section] = _class_reaches(classes[given[0].id])
    return out


def _class_reaches(cls: ast.ClassDef) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {where: set() for where in WHERE}
    init = next(
        (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
    )
    if init is None:
        return out
    params = {a.arg for a in [*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs][1:]}
    stored: dict[str, str] = {}  # self.<attribute> -> the parameter it holds
    hparams: set[str] = set()  # the parameters self.save_hyperparameters() keeps in self.hparams
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name)
            and node.value.id in params
        ):
            stored.update(
                {
                    t.attr: node.value.id
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and _on_self(t)
                }
            )
        elif (
            isinstance(node, ast.Call)
            and _call_name(node.func) == "save_hyperparameters"
            and _on_self(node.func)
        ):
            named = {
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            }
            hparams |= (named & params) if named else params
    for method in (f for f in cls.body if isinstance(f, ast.FunctionDef)):
        local = params if method is init else set()
        for where, exprs in sinks(method).items():
            for x in exprs:
                out[where] |= _held(x, local, stored, hparams)
    return out


def _held(expr: ast.expr, local: set[str], stored: dict[str, str], hparams: set[str]) -> set[str]:
    """The ``__init__`` parameters ``expr`` reads: ``num_workers`` (in ``__init__``), ``self.workers``,
    ``self.hparams.num_workers``, ``self.hparams["num_workers"]``."""
    out: set[str] = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and n.id in local:
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and _on_self(n) and n.attr in stored:
            out.add(stored[n.attr])
        elif (
            isinstance(n, (ast.Attribute, ast.Subscript))
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "hparams"
            and _on_self(n.value)
        ):
            key = (
                n.attr
                if isinstance(n, ast.Attribute)
                else n.slice.value
                if isinstance(n.slice, ast.Constant)
                else None
            )
            if key in hparams:
                out.add(str(key))
    return out


def _on_self(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _parse(file: str) -> ast.Module | None:
    try:
        return ast.parse(Path(file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


def _argument(call: ast.Call, name: str, index: int) -> list[ast.expr]:
    """The call's argument ``name``, given by keyword or as its ``index``-th positional argument."""
    given = [k.value for k in call.keywords if k.arg == name]
    return given or ([call.args[index]] if len(call.args) > index else [])


def _call_name(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _path(node: ast.expr) -> str:
    """``cfg.trainer.precision`` (or ``cfg["trainer"]["precision"]``) as the config key ``trainer.precision``."""
    parts: list[str] = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        elif isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            parts.append(node.slice.value)
        else:
            return ""
        node = node.value
    return ".".join(reversed(parts))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _attrs(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name)
    }
