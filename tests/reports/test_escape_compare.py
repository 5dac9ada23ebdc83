"""Escaping helpers and the A-vs-B comparison."""

from __future__ import annotations

import json
import re

import pytest

from advisors.analysis import analyse
from reports.charts import label
from reports.compare import compare, step_samples
from reports.escape import markdown_code, markdown_text, script_json

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "[x](javascript:alert(1))",
    "$\\frac{1}{2}$",
    ":red[boom]",
    "**bold** _it_ `code`",
    "line\nbreak | pipe",
]


@pytest.mark.parametrize("s", HOSTILE)
def test_markdown_text_leaves_no_syntax(s: str) -> None:
    out = markdown_text(s)
    assert "\n" not in out
    bare = re.sub(r"\\.", "", out)  # what is left unescaped
    for ch in "<>[]$*`|~":  # open syntax wherever they stand
        assert ch not in bare
    assert not re.search(r":\S", bare), "a colon that could start a link scheme or a :shortcode:"
    assert not re.search(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", bare), (
        "an underscore that could emphasise"
    )


def test_markdown_text_reads_as_plain_text() -> None:
    """Only what could start syntax is escaped: figures, ratios and identifiers read as written."""
    for s in (
        "median step 51.0 ms; samples/s: 320.0 (2 ranks)",
        "data_bound",
        "-3.2% vs 1.05x",
        "a & b",
    ):
        assert markdown_text(s) == s
    assert markdown_text("1. first") == "1\\. first" and markdown_text("# title") == "\\# title"
    assert markdown_text("- item") == "\\- item" and markdown_text("&amp;") == "\\&amp;"


def test_markdown_code_cannot_be_closed() -> None:
    block = markdown_code("a ``` b ```` c")
    fence = block.split("\n")[0]
    assert len(fence) == 5 and block.endswith(fence)


@pytest.mark.parametrize("s", HOSTILE)
def test_script_json_round_trips_without_markup(s: str) -> None:
    text = script_json({"name": s, "\u2028": "x"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"name": s, "\u2028": "x"}


def test_plotly_label_is_escaped_and_truncated() -> None:
    assert label("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert len(label("k" * 500, 20)) == 20


def test_compare_before_after_pair(shared_traces) -> None:
    a = analyse(shared_traces / "data/kineto_resnet50_num_workers_0.pt.trace.json.gz")
    b = analyse(shared_traces / "compute/kineto_resnet50_num_workers_4.pt.trace.json.gz")
    c = compare(a, b)
    assert len(c.step_ms_a) == len(step_samples(a)) > 0
    assert c.speedup is not None and c.speedup > 1.1  # workers=4 is the faster run
    loader = c.categories.set_index("category").loc["dataloader"]
    assert loader["delta_ms"] < -10  # the data loading time is what went away
    assert len(c.kernels) <= 15 and len(c.ops) <= 15
    assert c.kernels["delta_ms"].abs().is_monotonic_decreasing
