#!/usr/bin/env bash
# Installs missing build dependencies and builds stripefs into build/ (or $BUILD_DIR).
# Always the whole tree: STRIPEFS_SKIP is reset, so a stale cache cannot drop test groups.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$top/build}
"$top/scripts/install-deps.sh" "$@"
cmake -S "$top" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIPEFS_SKIP= >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
