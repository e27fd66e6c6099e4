#!/usr/bin/env bash
# Build the documentation site into docs/_build/html.
#
#   bash scripts/docs.sh            # set up .venv if needed, install the `docs` extra, build
#   SKIP_INSTALL=1 bash scripts/docs.sh   # build only, with the current .venv
#   DOCS_NO_GALLERY=1 bash scripts/docs.sh # skip running the gallery examples (fast check)
#   FORCE_INSTALL=1 bash scripts/docs.sh  # rebuild vastml too (after a change to the Rust core)
#
# When vastml is already built in .venv (by scripts/test.sh, say) only the packages of the
# `docs` extra are added; otherwise `pip install -e ".[docs]"` builds it.
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
    if [ "${FORCE_INSTALL:-0}" != "1" ] && python -c "import vastml._core" 2>/dev/null; then
        # vastml is already built in this .venv (e.g. by scripts/test.sh): add only the
        # packages of the `docs` extra, without rebuilding the Rust extension.
        mapfile -t DOCS_DEPS < <(python - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["docs"]))
PY
)
        python -m pip install -q "${DOCS_DEPS[@]}"
    else
        python -m pip install -q -e ".[docs]"
    fi
fi

export MPLBACKEND=Agg
rm -rf docs/_build/html
python -m sphinx -b html -W --keep-going -j "${DOCS_JOBS:-1}" docs docs/_build/html "$@"
echo "docs built: docs/_build/html/index.html"
