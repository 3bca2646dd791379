#!/usr/bin/env bash
# Install, then run the main job: replay the built-in stream through the model and keep
# serving its live dashboard at http://127.0.0.1:8765/ (STREAMTOPICS_SERVE changes it) until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/streamtopics demo --serve "${STREAMTOPICS_SERVE:-127.0.0.1:8765}" "$@"
