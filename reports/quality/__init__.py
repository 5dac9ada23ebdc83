"""What the user sees of a time-to-quality experiment: its figures (:mod:`.figures`, from the runs' curves) and its
summary in Markdown and a self-contained HTML page (:mod:`.summary`, from its one stored record)."""

from reports.quality.figures import round_figure, tradeoff_figure
from reports.quality.summary import cell, html_page, markdown

__all__ = ["cell", "html_page", "markdown", "round_figure", "tradeoff_figure"]
