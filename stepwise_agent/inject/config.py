"""The script's own knobs: how its user configures it, recorded so a fix can be shown (and measured) as the flag or
config line a person would change instead of code injected at boot.

Recorded, standard library only (nothing of a framework is imported on the script's behalf):

- every ``argparse`` parser that parses the script's command line (``sys.argv``): each option's flags, ``dest``,
  default, the value parsed, its action (``store_true``…) and type; ``HfArgumentParser`` is one such parser
  (its class and dataclasses named), so Hugging Face's ``--bf16``/``--dataloader_num_workers`` are seen there;
- ``HfArgumentParser.parse_json_file`` / ``parse_yaml_file``: the config file read (absolute path) and its keys;
- a jsonargparse parser (LightningCLI's) parsing the command line, its subcommand's (``fit``) included: each
  option's flags and dotted ``dest`` (``trainer.precision``) with the value parsed, and the files its
  ``--config`` option read (``library``: ``jsonargparse``; jsonargparse bypasses ``parse_known_args``);
- the command line's conventions that no parser of ours sees: ``--key=value`` globals of a nanoGPT-style
  ``configurator.py`` (the script's module-level globals, read at the first step), Hydra/OmegaConf ``key=value``
  overrides, jsonargparse/LightningCLI dotted options (``--trainer.precision``);
- the script's own autocast contexts and ``torch.compile`` calls (where a flag's value ends up);
- what a launcher passed down (``launcher``: ``accelerate launch``'s ``ACCELERATE_*`` environment);
- a Hydra job (``hydra``): the overrides as Hydra read them, the composed config's values by dotted key
  (``data.workers``), and its primary config file (read from the config Hydra hands the task; Hydra and OmegaConf
  are the script's imports, never ours).

All of it goes to ``injected.json`` under ``config`` (see :class:`ConfigRecorder.to_json`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

from stepwise_agent.inject.sites import is_user_file, user_site

SIMPLE = (bool, int, float, str)
_ACTIONS = {
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreAction: "store",
    argparse._StoreConstAction: "store_const",
}


def _plain(value: Any) -> Any:
    """A value as JSON holds it (anything else as its text)."""
    if value is None or isinstance(value, SIMPLE):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, SIMPLE) for v in value):
        return list(value)
    return str(value)


def _option(action: argparse.Action, namespace: Any) -> dict[str, Any] | None:
    if (
        isinstance(action, (argparse._HelpAction, argparse._VersionAction))
        or action.dest == argparse.SUPPRESS
    ):
        return None
    kind = next(
        (name for cls, name in _ACTIONS.items() if type(action) is cls), type(action).__name__
    )
    return {
        "flags": list(action.option_strings),
        "dest": action.dest,
        "default": _plain(action.default),
        "value": _plain(getattr(namespace, action.dest, action.default)),
        "action": kind,
        "type": getattr(action.type, "__name__", None) if action.type is not None else None,
        "nargs": _plain(action.nargs),
        "const": _plain(action.const),
        "choices": _plain(list(action.choices)) if action.choices is not None else None,
    }


def main_globals(source: str | None, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """A nanoGPT-style script's module-level globals (``compile = False``) as it now holds them (``namespace``,
    default: the running ``__main__``'s), when the script reads a configurator
    (``exec(open('configurator.py').read())``)."""
    main = sys.modules.get("__main__")
    if namespace is None and main is not None:
        namespace = vars(main)
    if namespace is None or not source or "configurator" not in source:
        return {}
    return {
        k: v
        for k, v in namespace.items()
        if not k.startswith("_") and isinstance(v, SIMPLE) and f"{k} =" in source
    }


def _restore(owner: Any, name: str, value: Any) -> Callable[[], None]:
    return lambda: setattr(owner, name, value)


class ConfigRecorder:
    """Patches ``ArgumentParser.parse_known_args`` (and HF's file readers, when transformers is imported) for the
    length of the run; ``to_json`` is what was seen."""

    def __init__(self, argv: list[str] | None = None, script: str | None = None) -> None:
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.script = script
        self.parsers: list[dict[str, Any]] = []
        self.files: list[dict[str, Any]] = []
        self.autocast: list[dict[str, Any]] = []
        self.compile_calls: list[dict[str, Any]] = []
        self.globals: dict[str, Any] = {}
        self._undo: list[Callable[[], None]] = []
        self._parsing = (
            0  # a jsonargparse parse of the command line in progress (a subcommand's is nested)
        )
        self.hydra: dict[str, Any] | None = None

    def install(self) -> None:
        original = argparse.ArgumentParser.parse_known_args
        me = self

        def parse_known_args(
            parser: argparse.ArgumentParser, args: Any = None, namespace: Any = None
        ) -> Any:
            out = original(parser, args, namespace)
            if args is None or list(args) == me.argv:
                try:
                    me._parsed(parser, out[0])
                except Exception:  # noqa: BLE001 - recording must never break the script's own parsing
                    pass
            return out

        argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign,assignment]
        self._undo.append(lambda: setattr(argparse.ArgumentParser, "parse_known_args", original))
        self._watch_torch()

    def _watch_torch(self) -> None:
        """The script's own autocast contexts (entered, with what) and ``torch.compile`` calls (from where)."""
        import torch

        cls = torch.autocast
        enter = cls.__enter__
        me = self

        def entered(ctx: Any) -> Any:
            site = user_site(2) if is_user_file(sys._getframe(1).f_code.co_filename) else None
            if site is not None and len(me.autocast) < 16:
                me.seen_autocast(
                    str(getattr(ctx, "device", "")),
                    getattr(ctx, "fast_dtype", None),
                    bool(getattr(ctx, "_enabled", True)),
                    site,
                )
            return enter(ctx)

        setattr(cls, "__enter__", entered)
        self._undo.append(lambda: setattr(cls, "__enter__", enter))
        compile_fn = torch.compile

        def compile_(*args: Any, **kwargs: Any) -> Any:
            site = user_site(2) if is_user_file(sys._getframe(1).f_code.co_filename) else None
            if site is not None and len(me.compile_calls) < 16:
                me.compile_calls.append(
                    {"site": site, "kwargs": {k: _plain(v) for k, v in kwargs.items()}}
                )
            return compile_fn(*args, **kwargs)

        setattr(torch, "compile", compile_)
        self._undo.append(lambda: setattr(torch, "compile", compile_fn))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _parsed(self, parser: argparse.ArgumentParser, namespace: Any) -> None:
        if any(p["id"] == id(parser) for p in self.parsers):
            return
        options = [o for a in parser._actions if (o := _option(a, namespace)) is not None]
        types = [t.__name__ for t in getattr(parser, "dataclass_types", []) or []]
        self.parsers.append(
            {
                "id": id(parser),
                "class": type(parser).__name__,
                "dataclasses": types,
                "site": user_site(3),
                "options": options,
            }
        )

    def patch_transformers(self, module: Any) -> None:
        """``transformers.hf_argparser``: the JSON/YAML file a ``HfArgumentParser`` reads its fields from."""
        cls = module.HfArgumentParser
        me = self
        for name in ("parse_json_file", "parse_yaml_file"):
            original = getattr(cls, name, None)
            if original is None:
                continue

            def reader(
                parser: Any, *args: Any, _original: Any = original, _name: str = name, **kwargs: Any
            ) -> Any:
                path = args[0] if args else kwargs.get("json_file", kwargs.get("yaml_file"))
                out = _original(parser, *args, **kwargs)
                fields = sorted(
                    {f for obj in out for f in getattr(obj, "__dataclass_fields__", {})}
                )
                me.files.append(
                    {
                        "file": os.path.abspath(str(path)),
                        "reader": _name,
                        "class": type(parser).__name__,
                        "site": user_site(2),
                        "fields": fields,
                    }
                )
                return out

            setattr(cls, name, reader)
            self._undo.append(_restore(cls, name, original))

    def patch_jsonargparse(self, module: Any) -> None:
        """``jsonargparse._core``: ``ArgumentParser.parse_args`` of the script's command line (``args`` ``None`` or
        ``sys.argv[1:]``), and of a subcommand's within it (the command line's tail)."""
        cls = module.ArgumentParser
        original = cls.parse_args
        me = self

        def parse_args(parser: Any, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
            mine = args is None or list(args) == me.argv
            nested = (
                not mine
                and me._parsing > 0
                and isinstance(args, (list, tuple))
                and list(args) == me.argv[len(me.argv) - len(args) :]
            )
            me._parsing += mine
            try:
                out = original(parser, args, *rest, **kwargs)
            finally:
                me._parsing -= mine
            if mine or nested:
                try:
                    me._parsed_jsonargparse(parser, out)
                except Exception:  # noqa: BLE001 - recording must never break the script's own parsing
                    pass
            return out

        setattr(cls, "parse_args", parse_args)
        self._undo.append(_restore(cls, "parse_args", original))

    def _parsed_jsonargparse(self, parser: Any, cfg: Any) -> None:
        site = user_site(3)
        options = []
        for action in parser._actions:
            kind = type(action).__name__
            if (
                not action.option_strings
                or action.dest == argparse.SUPPRESS
                or kind.startswith(("_Action", "_Help"))
            ):
                continue
            value = cfg.get(action.dest) if hasattr(cfg, "get") else None
            options.append(
                {
                    "flags": list(action.option_strings),
                    "dest": action.dest,
                    "default": _plain(action.default),
                    "value": _plain(value),
                    "action": kind,
                    "type": None,
                    "nargs": _plain(action.nargs),
                    "const": None,
                }
            )
            if kind == "ActionConfigFile":
                for path in value or []:
                    file = getattr(path, "absolute", None) or os.path.abspath(str(path))
                    self.files.append(
                        {
                            "file": str(file),
                            "reader": "jsonargparse",
                            "class": type(parser).__name__,
                            "library": "jsonargparse",
                            "option": list(action.option_strings),
                            "site": site,
                            "fields": [],
                        }
                    )
        self.parsers.append(
            {
                "id": id(parser),
                "class": type(parser).__name__,
                "library": "jsonargparse",
                "dataclasses": [],
                "site": site,
                "options": options[:400],
            }
        )

    def patch_hydra(self, module: Any) -> None:
        """``hydra.core.utils.run_job``: the config it hands the script's task function (the first job's)."""
        original = module.run_job
        me = self

        def run_job(*args: Any, **kwargs: Any) -> Any:
            if me.hydra is None:
                try:
                    me._hydra_job(kwargs.get("config", args[1] if len(args) > 1 else None))
                except Exception:  # noqa: BLE001 - recording must never break the script's own job
                    pass
            return original(*args, **kwargs)

        setattr(module, "run_job", run_job)
        self._undo.append(_restore(module, "run_job", original))

    def _hydra_job(self, config: Any) -> None:
        omegaconf = sys.modules.get("omegaconf")
        if omegaconf is None or config is None:
            return
        tree = omegaconf.OmegaConf.to_container(config, resolve=False)
        hydra = tree.pop("hydra", {}) if isinstance(tree, dict) else {}
        values: dict[str, Any] = {}

        def flat(node: Any, prefix: str) -> None:
            for key, value in node.items():
                if isinstance(value, dict):
                    flat(value, f"{prefix}{key}.")
                elif value is None or isinstance(value, SIMPLE):
                    values[f"{prefix}{key}"] = value

        flat(tree if isinstance(tree, dict) else {}, "")
        name = (hydra.get("job") or {}).get("config_name")
        file = None
        for source in (hydra.get("runtime") or {}).get("config_sources") or []:
            path = str(source.get("path") or "")
            if source.get("provider") == "main" and source.get("schema") == "file" and name:
                for ext in (".yaml", ".yml"):
                    if os.path.isfile(os.path.join(path, f"{name}{ext}")):
                        file = os.path.abspath(os.path.join(path, f"{name}{ext}"))
        self.hydra = {
            "overrides": [str(o) for o in (hydra.get("overrides") or {}).get("task") or []],
            "values": dict(list(values.items())[:400]),
            "file": file,
            "site": user_site(3),
        }

    def seen_autocast(
        self, device_type: str, dtype: Any, enabled: bool, site: dict[str, Any] | None
    ) -> None:
        entry = {
            "device_type": device_type,
            "dtype": str(dtype).replace("torch.", ""),
            "enabled": bool(enabled),
            "site": site,
        }
        if not any(e["site"] == site and e["enabled"] == entry["enabled"] for e in self.autocast):
            self.autocast.append(entry)

    def on_first_step(self, namespace: dict[str, Any] | None = None) -> None:
        source = None
        if self.script and os.path.isfile(self.script):
            try:
                with open(self.script, encoding="utf-8") as fh:
                    source = fh.read()
            except (OSError, UnicodeDecodeError):
                source = None
        self.globals = {k: _plain(v) for k, v in main_globals(source, namespace).items()}

    def to_json(self) -> dict[str, Any]:
        dotted = [a for a in self.argv if a.startswith("--") and "." in a.split("=", 1)[0]]
        overrides = [
            a
            for a in self.argv
            if "=" in a
            and not a.startswith("-")
            and a.split("=", 1)[0].replace(".", "").replace("+", "").replace("_", "").isalnum()
        ]
        return {
            "argv": self.argv,
            "script": self.script,
            "parsers": [{k: v for k, v in p.items() if k != "id"} for p in self.parsers],
            "files": self.files,
            "globals": self.globals,
            "overrides": overrides,
            "dotted": dotted,
            "launcher": {k: v for k, v in os.environ.items() if k.startswith("ACCELERATE_")},
            "hydra": self.hydra,
            "autocast": self.autocast,
            "compile_calls": self.compile_calls,
        }
