"""Streamlit building blocks the pages compose: panels, the sidebar, forms, live views and shared UI helpers."""
