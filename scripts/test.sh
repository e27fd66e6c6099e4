#!/usr/bin/env bash
# The whole test suite: cargo tests of the pure-Rust crates, then pytest against a fresh
# release build of the extension. Works on a fresh machine: it makes .venv and installs
# everything it needs from PyPI and crates.io. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
echo "== building vastml (release) and installing test dependencies"
# The extension is built for CPython's stable ABI (_core.abi3.so); a version-specific build left
# by an older checkout (_core.cpython-3XX-*.so) would be imported in its place.
rm -f python/vastml/_core.cpython-*.so
python -m pip install --quiet -e ".[test]"

echo "== cargo fmt --check, clippy"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test (pure-Rust crates)"
cargo test --workspace --exclude vastml-py --locked

echo "== mypy (the package; tests/test_core_stub.py runs mypy's stubtest on the extension)"
python -m mypy

echo "== pytest"
python -m pytest -q -p no:cacheprovider --doctest-modules --ignore=python/vastml/__main__.py python/vastml tests
