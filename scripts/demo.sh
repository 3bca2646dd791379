#!/usr/bin/env bash
# Install, then run the main job: replay the built-in stream through the model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/streamtopics demo "$@"
