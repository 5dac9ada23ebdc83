#!/usr/bin/env bash
# Starts the Stepwise dashboard at http://localhost:8501 on the embedded default:
# a local run store in ./runs, the sample workloads, no GPU or server needed. Arguments go to `stepwise dashboard`
# (Streamlit options, e.g. --server.port 8502).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/stepwise dashboard "$@"
