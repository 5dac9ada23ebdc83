"""Installed only into the tests' second environment (``.venv-user``): proves a script ran in *that* interpreter."""

MARKER = "only-in-user-env"
