#!/usr/bin/env bash
# Create .venv in the checkout and install streamtopics with every extra (serve, plot, bench, dask,
# test) and the Kafka jars.
# Safe to re-run: it only adds what is missing. Marks .venv current for demo.sh (scripts/venv_stamp.sh:
# 'all' includes demo.sh's 'serve').
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv_stamp.sh
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[all]"
mark_venv_current
# Debian's Chromium for the dashboard's browser test (Playwright drives the system binary; no
# browser download).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
# Kafka's jars from Maven Central (cached in kafka/libs and ~/.m2) for the real-broker tests.
.venv/bin/python -m devtools.kafka_broker fetch
