"""A typed value to plain JSON and back, exactly: how an :class:`~advisors.analysis.value.Analysis` is stored.

Driven by the dataclasses' own annotations (``typing.get_type_hints``): a dataclass becomes an object of its init
fields, an Enum its value, a tuple or list a list, a mapping with string keys an object (other keys: a list of
pairs), a class with ``to_dict``/``from_dict`` (a spec) its dict, a DataFrame its columns with their dtypes, and
``Any`` plain JSON as it is. Only the classes the annotations name are ever built back: nothing in the file
chooses a type, so a stored file cannot make the reader construct anything else.

Floats survive exactly (orjson writes the shortest text that reads back to the same double); a float that is not
finite is written as a tagged string, since JSON has no NaN. A test holds ``decode(encode(a)) == a`` for the
analysis of every shared trace and stored run.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import types
import typing
from typing import Any, Union, get_args, get_origin, get_type_hints

import numpy as np
import pandas as pd

from advisors.bounds import Bound
from advisors.verdict import Diagnosis

_HINTS: dict[type, dict[str, Any]] = {}
#: Fields whose annotation says less than what they hold, with what they hold (``Diagnosis.bounds`` is annotated
#: ``Any`` there: advisors.bounds imports advisors.verdict).
OVERRIDES: dict[tuple[type, str], Any] = {(Diagnosis, "bounds"): dict[str, Bound]}
_FLOAT_TAG = "$float"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _fields(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        hints = get_type_hints(cls)
        for (owner, name), hint in OVERRIDES.items():
            if owner is cls and name in hints:
                hints[name] = hint
        _HINTS[cls] = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    return _HINTS[cls]


def _optional(hint: Any) -> tuple[Any, ...] | None:
    """The non-None members of a union, or None when ``hint`` is not a union."""
    if get_origin(hint) in (Union, types.UnionType):
        return tuple(a for a in get_args(hint) if a is not type(None))
    return None


def encode(value: Any, hint: Any) -> Any:
    """``value`` (of type ``hint``) as plain JSON types."""
    if value is None:
        return None
    members = _optional(hint)
    if members is not None:
        return encode(value, members[0]) if len(members) == 1 else plain(value)
    origin = get_origin(hint)
    if hint is Any or hint is object or origin is typing.Literal:
        return plain(value)
    if origin in (tuple, list):
        args = get_args(hint)
        if origin is tuple and args and args[-1] is not Ellipsis:
            return [encode(v, t) for v, t in zip(value, args)]
        return [encode(v, args[0] if args else Any) for v in value]
    if origin in (dict, collections.abc.Mapping, typing.Mapping):
        key, item = get_args(hint) or (str, Any)
        if key is str:
            return {k: encode(v, item) for k, v in value.items()}
        return [[encode(k, key), encode(v, item)] for k, v in value.items()]
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return value.value
        if issubclass(hint, pd.DataFrame):
            return _frame(value)
        if dataclasses.is_dataclass(hint):
            return {name: encode(getattr(value, name), t) for name, t in _fields(hint).items()}
        if hasattr(hint, "from_dict") and hasattr(value, "to_dict"):
            return plain(value.to_dict())
        if hint in (int, float, str, bool):
            return plain(value)
    raise TypeError(f"cannot store a {type(value).__name__} as {hint!r}")


def decode(data: Any, hint: Any) -> Any:
    """What :func:`encode` wrote, as the type ``hint`` again."""
    if data is None:
        return None
    members = _optional(hint)
    if members is not None:
        return decode(data, members[0]) if len(members) == 1 else unplain(data)
    origin = get_origin(hint)
    if hint is Any or hint is object or origin is typing.Literal:
        return unplain(data)
    if origin in (tuple, list):
        args = get_args(hint)
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(decode(v, t) for v, t in zip(data, args))
        items = [decode(v, args[0] if args else Any) for v in data]
        return tuple(items) if origin is tuple else items
    if origin in (dict, collections.abc.Mapping, typing.Mapping):
        key, item = get_args(hint) or (str, Any)
        if key is str:
            return {k: decode(v, item) for k, v in data.items()}
        return {decode(k, key): decode(v, item) for k, v in data}
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return hint(data)
        if issubclass(hint, pd.DataFrame):
            return _unframe(data)
        if dataclasses.is_dataclass(hint):
            return hint(
                **{name: decode(data[name], t) for name, t in _fields(hint).items() if name in data}
            )
        if hasattr(hint, "from_dict"):
            return hint.from_dict(unplain(data))
        if hint in (int, float, str, bool):
            return unplain(data)
    raise TypeError(f"cannot read {hint!r} from stored JSON")


def plain(value: Any) -> Any:
    """JSON types of a value that already is plain data (numpy scalars and arrays as Python's, tuples as lists)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {_FLOAT_TAG: repr(value)}
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    raise TypeError(f"cannot store a {type(value).__name__} as plain JSON")


def unplain(data: Any) -> Any:
    """:func:`plain`'s output read back (a non-finite float from its tag)."""
    if isinstance(data, dict):
        if len(data) == 1 and _FLOAT_TAG in data:
            return _NON_FINITE[data[_FLOAT_TAG]]
        return {k: unplain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [unplain(v) for v in data]
    return data


def _cell(v: Any) -> Any:
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v)):
        return None
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)  # "inf", "-inf": a float column reads them back
    return v if isinstance(v, (str, bool, int, float)) else plain(v)


def _frame(df: pd.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {
        "columns": [plain(c) for c in df.columns],
        "dtypes": [str(t) for t in df.dtypes],
        "data": [[_cell(v) for v in df.iloc[:, i].tolist()] for i in range(df.shape[1])],
        "rows": len(df),
    }
    index = df.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        out["index"] = {
            "name": plain(index.name),
            "dtype": str(index.dtype),
            "values": [_cell(v) for v in index.tolist()],
        }
    return out


def _unframe(data: dict[str, Any]) -> pd.DataFrame:
    idx = data.get("index")
    index = (
        pd.RangeIndex(data["rows"])
        if idx is None
        else pd.Index(idx["values"], dtype=idx["dtype"], name=idx["name"])
    )
    columns = [
        pd.Series(values, dtype=dtype, index=index)
        for values, dtype in zip(data["data"], data["dtypes"])
    ]
    if not columns:
        return pd.DataFrame(index=index)
    frame = pd.concat(columns, axis=1, ignore_index=True)
    frame.columns = pd.Index(data["columns"])
    return frame
