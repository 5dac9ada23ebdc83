#!/usr/bin/env bash
# Type-checks the packages (mypy), lints the tree and checks its formatting (ruff check, ruff format --check; all
# configured in pyproject.toml), then runs the whole test suite, real-browser tests included (installs Debian's
# chromium when missing). Arguments go to pytest; a mypy, lint or format error fails the run before any test.
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
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# Two lanes: the tests that time nothing spread over both cores (pytest-xdist, as the fast lane runs them), then
# real training runs, wall-clock waits and Chromium in one process (their timing margins assume it). Arguments
# go to both; exit 5 (no test of that lane selected) counts as a pass when the other lane ran tests.
set +e
.venv/bin/python -m pytest -m "not slow and not browser" -n "${STEPWISE_TEST_WORKERS:-2}" "$@"
fast=$?
.venv/bin/python -m pytest -m "slow or browser" "$@"
slow=$?
set -e
for rc in "$fast" "$slow"; do
  if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then exit "$rc"; fi
done
if [ "$fast" = 5 ] && [ "$slow" = 5 ]; then exit 5; fi
exit 0
