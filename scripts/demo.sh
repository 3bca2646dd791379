#!/usr/bin/env bash
# Install what the main job needs -- the package, its core dependencies and the 'serve' extra for
# the dashboard; no test or benchmark extras, no browser, no Kafka jars -- then run it: replay the
# built-in stream through the model and keep serving its live dashboard at http://127.0.0.1:8765/
# (STREAMTOPICS_SERVE changes it) until Ctrl-C. Arguments go to `streamtopics demo`. Later runs
# skip the install while pyproject.toml is unchanged (scripts/venv_stamp.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv_stamp.sh
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if ! venv_is_current; then
  # --no-compile: Python writes the bytecode of the modules it imports on first use; compiling every
  # module of scipy and numba up front (their tests included) would add ~90 MB to the virtualenv.
  .venv/bin/python -m pip install --quiet --no-compile --upgrade pip
  # -qq: errors only (setuptools' note on editable installs is not for the demo's user).
  .venv/bin/python -m pip install -qq --no-compile -e ".[serve]"
  mark_venv_current
fi
exec .venv/bin/streamtopics demo --serve "${STREAMTOPICS_SERVE:-127.0.0.1:8765}" "$@"
