#!/usr/bin/env bash
# Creates .venv and installs Stepwise with everything it needs; quick when nothing changed.
# Sourced by dashboard.sh and test.sh so that each README command works on a fresh machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY="$cand"; break; }; done
fi
[ -d .venv ] || "$PY" -m venv .venv
STAMP=.venv/.stepwise-installed
WANT="$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
  .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$WANT" > "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"
