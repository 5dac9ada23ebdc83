"""Shareable exports of an :class:`~advisors.analysis.Analysis`: one self-contained HTML file, JSON, Markdown.

``write_report(analysis, path, fmt=None)`` is what the command line calls (``fmt`` from the suffix when
omitted); ``render(analysis, fmt)`` returns the bytes (the dashboard's download buttons). A comparison of two
inputs with the regression gate's verdict exports the same way: ``write_comparison``/``render_comparison``.

HTML safety: the template is rendered by jinja2 with autoescape on, so every string from a trace or spec is
text. Figures travel as JSON in ``<script type="application/json">`` elements (``<``, ``>``, ``&`` escaped,
:func:`reports.escape.script_json`), and a Content-Security-Policy allows exactly the two inline scripts the
file carries (by hash) — plotly.js and the bootstrap that draws the figures — no network, no other script,
no inline event handler. plotly.js is embedded, so the file opens offline.
"""

from __future__ import annotations

import base64
import hashlib
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import orjson
import plotly.io as pio
import plotly.offline

from advisors.analysis import Analysis
from advisors.compare.regression import RegressionCheck
from advisors.experiments.results.record import LadderRecord
from advisors.experiments.results.stored_view import StoredView
from reports import content
from reports.content import compare as content_compare
from reports.charts import BOTTLENECK_COLORS
from reports.compare import Comparison
from reports.escape import markdown_code, markdown_text, script_json_text
from reports.figures import (
    Figure,
    analysis_figures,
    comparison_figures,
    experiment_figures,
    ladder_figures,
    watch_figures,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"
FORMATS = {"html": "text/html", "json": "application/json", "md": "text/markdown"}
_SUFFIXES = {".html": "html", ".htm": "html", ".json": "json", ".md": "md", ".markdown": "md"}
BOOTSTRAP = """document.querySelectorAll('script[type="application/json"][data-figure]').forEach(function (el) {
  var fig = JSON.parse(el.textContent);
  var div = document.getElementById(el.getAttribute('data-figure'));
  Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false}).then(function () {
    div.setAttribute('data-rendered', 'true');
  });
});"""


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    # Autoescape HTML templates (and any template string); Markdown templates escape with the ``md`` filter.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(
            ["html", "html.j2"], default_for_string=True, default=False
        ),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = markdown_text
    env.filters["md_code"] = markdown_code
    return env


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    return plotly.offline.get_plotlyjs()


def _csp_hash(script: str) -> str:
    return (
        "'sha256-"
        + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
        + "'"
    )


def fmt_for(path: str | Path, fmt: str | None = None) -> str:
    """The export format: ``fmt`` when given, else from the file suffix; ValueError for anything else."""
    chosen = fmt or _SUFFIXES.get(Path(path).suffix.lower())
    if chosen not in FORMATS:
        raise ValueError(
            f"unknown report format {chosen or Path(path).suffix!r}; use one of {', '.join(FORMATS)}"
        )
    return chosen


def render(
    analysis: Analysis,
    fmt: str,
    comparison: Comparison | None = None,
    experiment: StoredView | None = None,
    ladder: LadderRecord | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The report as bytes in ``fmt`` (``html``, ``json`` or ``md``); ``comparison`` adds an A-vs-B section,
    ``experiment`` (an Apply's stored record and charts) the applied fix with its before/after, ``ladder`` (a
    ladder's record) every attempt of an optimisation. On a script both say where in the user's file a kept fix
    belongs and show the diff. ``extra``: the run's experiments, commands and environment
    (:func:`reports.run_report.context.report_extra`, which both doors call)."""
    fmt = fmt_for("", fmt)
    more = {"reproduce": None, "environment": {}, "experiments": [], "watch": None, **(extra or {})}
    ctx = {**content.report_context(analysis, comparison, experiment, ladder), **more}
    if fmt == "json":
        return orjson.dumps(
            {**content.report_json(analysis, comparison, experiment, ladder), **(extra or {})},
            option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    if fmt == "md":
        return _env().get_template("report.md.j2").render(**ctx).encode("utf-8")
    figures = (
        analysis_figures(analysis)
        + (comparison_figures(comparison) if comparison else [])
        + (experiment_figures(experiment) if experiment is not None else [])
        + (ladder_figures(ladder) if ladder is not None else [])
        + watch_figures(more.get("watch"))
    )
    return _html("report.html.j2", ctx, figures)


def render_comparison(check: RegressionCheck, tables: Comparison, fmt: str) -> bytes:
    """The comparison of two inputs as bytes in ``fmt``: the gate's verdict and reason, both sides, what moved,
    the A-vs-B charts (``tables`` from :func:`reports.compare.compare` on the same two analyses)."""
    fmt = fmt_for("", fmt)
    if fmt == "json":
        return orjson.dumps(
            content_compare.comparison_json(check, tables),
            option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    ctx = content_compare.comparison_context(check, tables)
    if fmt == "md":
        return _env().get_template("compare.md.j2").render(**ctx).encode("utf-8")
    return _html("compare.html.j2", ctx, comparison_figures(tables))


def _html(template: str, ctx: dict[str, Any], figures: list[Figure]) -> bytes:
    plotly_js = _plotly_js()
    html = (
        _env()
        .get_template(template)
        .render(
            **ctx,
            figures=[
                {"key": f.key, "json": script_json_text(pio.to_json(f.figure, validate=False))}
                for f in figures
            ],
            plotly_js=plotly_js,
            bootstrap=BOOTSTRAP,
            colors=BOTTLENECK_COLORS,
            csp_scripts=f"{_csp_hash(plotly_js)} {_csp_hash(BOOTSTRAP)}",
            generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        )
    )
    return html.encode("utf-8")


def write_report(
    analysis: Analysis,
    path: str | Path,
    fmt: str | None = None,
    comparison: Comparison | None = None,
    experiment: StoredView | None = None,
    ladder: LadderRecord | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the report to ``path`` atomically (temp file + rename); returns the path. ``extra``: as for
    :func:`render`."""
    out = Path(path)
    return _write(out, render(analysis, fmt_for(out, fmt), comparison, experiment, ladder, extra))


def write_comparison(
    check: RegressionCheck, tables: Comparison, path: str | Path, fmt: str | None = None
) -> Path:
    """Write the comparison to ``path`` atomically (format from the suffix unless ``fmt``); returns the path."""
    out = Path(path)
    return _write(out, render_comparison(check, tables, fmt_for(out, fmt)))


def _write(out: Path, data: bytes) -> Path:
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out


__all__ = ["FORMATS", "fmt_for", "render", "render_comparison", "write_comparison", "write_report"]
