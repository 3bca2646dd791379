#!/usr/bin/env bash
# Install what the main job needs (the package and its dependencies; no test or benchmark
# extras, no browser, no Kafka jars), then run it: replay the built-in stream through the model
# and keep serving its live dashboard at http://127.0.0.1:8765/ (STREAMTOPICS_SERVE changes it)
# until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/streamtopics demo --serve "${STREAMTOPICS_SERVE:-127.0.0.1:8765}" "$@"
