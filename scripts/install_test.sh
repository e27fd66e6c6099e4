#!/usr/bin/env bash
# Installs the wheel that scripts/wheel.sh left in dist/ the way a user would, trusting nothing
# local: a fresh venv in a temporary folder, a PATH with no cargo or rustc, run from outside the
# source tree. Then `vastml demo --quick`, every sub-package imported and a checked smoke test of
# each area (scripts/install_smoke.py), and the wheel's size and import times, which must be
# under the limits below. Exits non-zero on any failure.
#
#   bash scripts/wheel.sh && bash scripts/install_test.sh
#   bash scripts/install_test.sh --sdist    # instead: pip install the sdist (compiles; needs cargo)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
PYTHON=$(command -v "$PYTHON")
IMPORT_LIMIT_MS=${IMPORT_LIMIT_MS:-150}          # import vastml
KERNELS_LIMIT_MS=${KERNELS_LIMIT_MS:-300}        # import vastml.kernels

mode=wheel
[ "${1:-}" = "--sdist" ] && mode=sdist
if [ "$mode" = wheel ]; then
    pkg=$(ls "$repo"/dist/vastml-*.whl 2>/dev/null | head -n 1 || true)
else
    pkg=$(ls "$repo"/dist/vastml-*.tar.gz 2>/dev/null | head -n 1 || true)
fi
[ -n "$pkg" ] || { echo "no $mode in $repo/dist: run bash scripts/wheel.sh first" >&2; exit 1; }

work=$(mktemp -d /tmp/vastml-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$repo/scripts/install_smoke.py" "$work/"
# downloads may come from pip's cache (they are checked by pip); nothing else is shared
pip_cache=${PIP_CACHE_DIR:-$HOME/.cache/pip}
cd "$work"

echo "== fresh venv in $work, installing $(basename "$pkg")"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
# a PATH with the venv and the system's folders only, none of which has cargo or rustc
clean_path="$work/venv/bin"
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    if [ -d "$d" ] && [ ! -e "$d/cargo" ] && [ ! -e "$d/rustc" ]; then clean_path="$clean_path:$d"; fi
done
if [ "$mode" = wheel ]; then
    run() { env -i HOME="$work" PATH="$clean_path" LANG=C.UTF-8 PIP_CACHE_DIR="$pip_cache" "$@"; }
    if run sh -c 'command -v cargo || command -v rustc'; then
        echo "cargo or rustc is still on the test PATH" >&2
        exit 1
    fi
    # --only-binary: pip must not fall back to building anything from source
    run python -m pip install --quiet --only-binary :all: "$pkg[distributed,plot]"
else
    # only Rust (cargo's folder) and pip besides the system: maturin comes from PyPI
    cargo_bin=$(dirname "$(command -v cargo)")
    rust_env=(RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}")
    run() {
        env -i HOME="$work" PATH="$clean_path:$cargo_bin" LANG=C.UTF-8 PIP_CACHE_DIR="$pip_cache" \
            "${rust_env[@]}" "$@"
    }
    start=$(date +%s)
    run python -m pip install --quiet "$pkg[distributed,plot]"
    echo "sdist built and installed in $(( $(date +%s) - start )) s"
fi

echo "== vastml demo --quick"
run vastml demo --quick --out "$work/demo.png"
[ -s "$work/demo.png" ] || { echo "the demo wrote no picture" >&2; exit 1; }

echo "== smoke test of every area"
run python install_smoke.py

echo "== size and import time"
if [ "$mode" = wheel ]; then
    size=$(stat -c %s "$pkg")
    echo "wheel: $(basename "$pkg"), $(( size / 1024 )) KiB"
fi
# `python -X importtime` prints one line per module; a line whose name is not indented is a
# top-level import, and its cumulative column includes everything it imported. The best of five
# runs is taken (a loaded machine only ever adds time).
import_ms() {
    local best=
    for _ in 1 2 3 4 5; do
        local us
        us=$(run python -X importtime -c "$1" 2>&1 >/dev/null \
            | awk -F'|' '/^import time:/ && $3 ~ /^ vastml/ { gsub(/ /, "", $2); s += $2 } END { print s + 0 }')
        if [ -z "$best" ] || [ "$us" -lt "$best" ]; then best=$us; fi
    done
    echo $(( best / 1000 ))
}
ms_vastml=$(import_ms "import vastml")
ms_kernels=$(import_ms "import vastml.kernels")
echo "python -X importtime -c 'import vastml':         ${ms_vastml} ms (limit ${IMPORT_LIMIT_MS} ms)"
echo "python -X importtime -c 'import vastml.kernels': ${ms_kernels} ms (limit ${KERNELS_LIMIT_MS} ms)"
echo "python -X importtime -c 'import vastml', slowest entries with interpreter start-up (cumulative us):"
run python -X importtime -c "import vastml" 2>&1 >/dev/null | awk -F'|' '/^import time:/ && $2 !~ /cumulative/ {
    gsub(/ /, "", $2); print $2 "\t" $3 }' | sort -rn | head -n 8
uptime
fail=0
[ "$ms_vastml" -le "$IMPORT_LIMIT_MS" ] || { echo "import vastml is too slow" >&2; fail=1; }
[ "$ms_kernels" -le "$KERNELS_LIMIT_MS" ] || { echo "import vastml.kernels is too slow" >&2; fail=1; }
[ $fail = 0 ] || exit 1
echo "install test passed ($mode)"
