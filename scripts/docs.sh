#!/usr/bin/env bash
# Build the documentation site into docs/_build/html.
#
#   bash scripts/docs.sh            # set up .venv if needed, install the `docs` extra, build
#   SKIP_INSTALL=1 bash scripts/docs.sh   # build only, with the current .venv
#   DOCS_NO_GALLERY=1 bash scripts/docs.sh # skip running the gallery examples (fast check)
#
# Warnings are errors (-W --keep-going): the build fails on a broken reference, a docstring
# numpydoc cannot parse, or a gallery example that raises.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate

if [ "${SKIP_INSTALL:-0}" != "1" ]; then
    python -m pip install -q --upgrade pip
    python -m pip install -q -e ".[docs]"
fi

export MPLBACKEND=Agg
rm -rf docs/_build/html
python -m sphinx -b html -W --keep-going -j "${DOCS_JOBS:-1}" docs docs/_build/html "$@"
echo "docs built: docs/_build/html/index.html"
