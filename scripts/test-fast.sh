#!/usr/bin/env bash
# The fast lane, while editing: every test but those marked slow (real training runs, subprocess command lines
# on real runs, wall-clock waits) and browser (real Chromium). scripts/test.sh still runs them all.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m pytest -m "not slow and not browser" -q "$@"
