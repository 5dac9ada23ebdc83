"""Presentation of analyses: charts (plotly), comparisons and shareable exports (HTML, JSON, Markdown).

Used by the dashboard (``app/``) and by the command line (``python -m advisors analyze --report``); nothing
here imports streamlit. Imports point one way: ``app → reports → advisors → profilers``.
"""
