"""Escaping of strings that come from traces, specs or file names, for every text format we write.

HTML goes through jinja2's autoescape (``reports/templates``) and plotly labels through
:func:`reports.charts.label`; this module covers Markdown (the Markdown export and Streamlit text elements,
which render Markdown, ``$math$`` and ``:colour[...]`` directives) and JSON inside a ``<script>`` element.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Escaped wherever they stand: they open inline syntax anywhere (code, emphasis, links, HTML, tables, strike,
# Streamlit's LaTeX).
_MD_ALWAYS = r"\\`*\[\]<>|~$"
_MD_SPECIAL = re.compile(
    rf"([{_MD_ALWAYS}])"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"  # intraword ``_`` (data_bound) never emphasises: left readable
    r"|:(?=\S)"  # ``http://``, ``:smile:``, ``:red[…]``; but ``ratio: 2`` stays as written
    r"|&(?=#?[A-Za-z0-9]+;)"  # an entity (``&amp;``), not a bare ``&``
    r"|(?<=\bwww)\."  # GFM links a bare ``www.example.com``
)
# At the start of a value (a template may put it at the start of a line): headings, lists, quotes, rules.
_MD_LINE_START = re.compile(r"^(\s*)(?:(?:#{1,6}|[+\-=]+)(?=\s|$)|\d{1,9}(?=[.)](?:\s|$)))")


def markdown_text(text: object, limit: int | None = None) -> str:
    """``text`` as literal Markdown that still reads as plain text: only a character that could start syntax
    where it stands is backslash-escaped (``51.0 ms`` and ``data_bound`` stay as they are), newlines become
    spaces (one value never breaks a table row or starts a block)."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    s = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), s)
    m = _MD_LINE_START.match(s)
    if m is None:
        return s
    lead = m.group(1)
    if s[len(lead)].isdigit():  # ``1. `` or ``1) ``: escape the delimiter after the number
        end = m.end()
        return s[:end] + "\\" + s[end:]
    return lead + "\\" + s[len(lead) :]


def markdown_code(text: object, language: str = "") -> str:
    """``text`` inside a fenced code block that it cannot close (the fence is longer than any backtick run);
    ``language`` (letters only, e.g. ``diff``) names the block's syntax."""
    s = str(text)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * max(3, longest + 1)
    lang = language if re.fullmatch(r"[A-Za-z]*", language) else ""
    return f"{fence}{lang}\n{s}\n{fence}"


def script_json(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the line
    separators U+2028/9 are written as ``\\u`` escapes, so no string can close the element or open a comment."""
    return script_json_text(json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str))


def script_json_text(text: str) -> str:
    """Already-serialised JSON made safe inside a ``<script>`` element, as :func:`script_json` does."""
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
