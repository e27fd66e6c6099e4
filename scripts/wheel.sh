#!/usr/bin/env bash
# Builds what `pip install vastml` installs: a release wheel and an sdist, into dist/.
#
# - The wheel uses CPython's stable ABI (pyo3 feature abi3-py311, set in rust/vastml-py/Cargo.toml):
#   one file for CPython 3.11 and every later version.
# - It is linked by zig (the `ziglang` package from PyPI) against glibc 2.17, so it is a
#   manylinux2014 (= manylinux_2_17) x86_64 wheel that installs on old and new Linux alike;
#   `auditwheel show` must say so, or this script fails.
# - Nothing is compiled for the build machine's CPU: the SIMD kernels pick AVX2 / FMA at run
#   time. The script refuses to build if `target-cpu=native` (or RUSTFLAGS) would leak in.
# - The sdist holds the Rust workspace and the Python package; `pip install vastml-*.tar.gz`
#   builds it with only Rust and pip present.
#
# The build tools live in their own venv (target/wheel-venv) so the project's .venv is untouched.
# Usage: bash scripts/wheel.sh            (then: bash scripts/install_test.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VASTML_BUILD_VENV:-target/wheel-venv}
OUT=dist

echo "== checking that nothing compiles for the build machine's CPU"
if [ -n "${RUSTFLAGS:-}${CARGO_BUILD_RUSTFLAGS:-}${CARGO_ENCODED_RUSTFLAGS:-}" ]; then
    echo "RUSTFLAGS is set (${RUSTFLAGS:-}${CARGO_BUILD_RUSTFLAGS:-}); unset it for a portable wheel" >&2
    exit 1
fi
# the repository, and any cargo config cargo would read from here up or from CARGO_HOME
configs=()
d=$PWD
while :; do
    for f in "$d/.cargo/config" "$d/.cargo/config.toml"; do [ -f "$f" ] && configs+=("$f"); done
    [ "$d" = / ] && break
    d=$(dirname "$d")
done
for f in "${CARGO_HOME:-$HOME/.cargo}/config" "${CARGO_HOME:-$HOME/.cargo}/config.toml"; do
    [ -f "$f" ] && configs+=("$f")
done
# where compiler flags can be set: manifests, cargo configs, build scripts, the build scripts here
if git grep -nE 'target-cpu|target_cpu|rustflags' -- '*.toml' '*build.rs' '.cargo/*' '.ci/*' \
    'scripts/*.sh' ':!scripts/wheel.sh' \
    || { [ ${#configs[@]} -gt 0 ] && grep -nE 'target-cpu|rustflags' "${configs[@]}"; }; then
    echo "a target-cpu / rustflags setting was found above; the wheel must run on any x86-64" >&2
    exit 1
fi

echo "== build tools (maturin, ziglang, auditwheel) in $VENV"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# zig is pinned to the minor that maturin (cargo-zigbuild) is known to work with here
"$VENV/bin/python" -m pip install --quiet "maturin>=1.16,<2" "ziglang>=0.17,<0.18" "auditwheel>=6.8,<7"
# maturin looks for zig as `python -m ziglang`: put the build venv first on PATH
export PATH="$PWD/$VENV/bin:$PATH"

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== wheel: release, abi3, manylinux2014 x86_64 (zig linker)"
start=$(date +%s)
maturin build --release --locked --zig --compatibility manylinux2014 \
    --target x86_64-unknown-linux-gnu --out "$OUT"
echo "wheel built in $(( $(date +%s) - start )) s"
echo "== sdist"
maturin sdist --out "$OUT"

wheel=$(ls "$OUT"/*.whl)
sdist=$(ls "$OUT"/*.tar.gz)
echo "== auditwheel show $(basename "$wheel")"
auditwheel show "$wheel" | tee "$OUT/auditwheel.txt"
# auditwheel says: 'This constrains the platform tag to "manylinux_2_17_x86_64"'
if ! grep -q 'platform tag to "manylinux_2_17_x86_64"' "$OUT/auditwheel.txt"; then
    echo "auditwheel does not report the wheel as manylinux2014 (manylinux_2_17) compliant" >&2
    exit 1
fi
case "$(basename "$wheel")" in
    *-cp311-abi3-*manylinux2014_x86_64*.whl) ;;
    *) echo "unexpected wheel tags: $(basename "$wheel")" >&2; exit 1 ;;
esac
rm -f "$OUT/auditwheel.txt"
# the sdist must carry the lock file (pyproject says locked = true) and the whole workspace
listing=$(tar -tzf "$sdist")
for f in Cargo.lock Cargo.toml pyproject.toml rust/vastml-py/Cargo.toml python/vastml/_core.pyi \
    python/vastml/py.typed; do
    grep -qx "vastml-[^/]*/$f" <<<"$listing" || { echo "sdist lacks $f" >&2; exit 1; }
done
echo "== dist/"
ls -l "$OUT"
