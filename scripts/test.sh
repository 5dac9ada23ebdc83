#!/usr/bin/env bash
# Type-checks the packages (mypy, configured in pyproject.toml), then runs the whole test suite, real-browser
# tests included (installs Debian's chromium when missing). Arguments go to pytest; a mypy error fails the run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null
  else
    sudo sh -c 'apt-get update -qq && apt-get install -y -qq chromium' >/dev/null
  fi
fi
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
