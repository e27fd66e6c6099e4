#!/usr/bin/env bash
# Installs vastml into .venv (release build, with matplotlib) and runs `vastml demo`.
# Extra arguments go to `vastml demo` (try --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[plot]"
exec .venv/bin/vastml demo "$@"
