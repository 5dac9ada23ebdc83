#!/usr/bin/env bash
# Builds the tests' second environment, .venv-user: a user's training env as it would be, with none of Stepwise's
# own dependencies. torch from this machine's wheel (the same 2.13.0 CPU build), transformers, accelerate,
# lightning, jsonargparse (LightningCLI) and hydra-core from the registry, and a package only this env has
# (tests/user_env/only_in_user_env_pkg).
# Quick when nothing changed (a stamp of this file and the package). Prints the interpreter's path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ENV="${STEPWISE_USER_ENV:-$ROOT/.venv-user}"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do command -v "$cand" >/dev/null 2>&1 && { PY="$cand"; break; }; done
fi
if [ -L "$ENV" ] && [ ! -e "$ENV/bin/python" ]; then rm -f "$ENV"; fi  # a link to nothing (or to itself): rebuild
# One build at a time: test processes running side by side (pytest-xdist) may all ask for it at once.
mkdir -p "$(dirname "$ENV")"
exec 9>"$ENV.lock"
flock 9
STAMP="$ENV/.stepwise-user-env"
WANT="$(cat scripts/user-env.sh tests/user_env/only_in_user_env_pkg/pyproject.toml tests/user_env/only_in_user_env_pkg/only_in_user_env/__init__.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  rm -rf "$ENV"
  "$PY" -m venv "$ENV"
  "$ENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$ENV/bin/python" -m pip install --quiet "torch==2.13.0" "transformers>=4.40" "accelerate>=0.30" "lightning>=2.2" \
    "jsonargparse[signatures]>=4.27" "hydra-core>=1.3" >&2
  "$ENV/bin/python" -m pip install --quiet --no-build-isolation ./tests/user_env/only_in_user_env_pkg >&2
  echo "$WANT" > "$STAMP"
fi
echo "$ENV/bin/python"
