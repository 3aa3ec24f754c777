#!/usr/bin/env bash
# Runs every stripefs test: installs what is missing, builds, then runs the
# ctest groups in turn: unit, integration, fuzz (clang build) and kernel (QEMU
# guest). Exits non-zero if any test fails. Usage: scripts/test.sh [-L LABEL]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$top/build}
label=""
if [ "${1:-}" = "-L" ]; then label=$2; fi

"$top/scripts/build.sh" --with-kernel
cd "$BUILD_DIR"
status=0
run() {  # run LABEL [ctest args...]
  local l=$1; shift
  if [ -n "$label" ] && [ "$label" != "$l" ]; then return 0; fi
  echo "=== ctest -L $l ==="
  ctest -L "^$l\$" --output-on-failure --no-tests=ignore "$@" || status=1
}
run unit -j"$(nproc)" --timeout 600
run integration --timeout 900

# Fuzzers need clang's libFuzzer: a separate build dir with STRIPEFS_FUZZ=ON.
if [ -z "$label" ] || [ "$label" = fuzz ]; then
  FUZZ_DIR=${FUZZ_DIR:-$top/build-fuzz}
  CC=clang CXX=clang++ cmake -S "$top" -B "$FUZZ_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIPEFS_FUZZ=ON -DSTRIPEFS_WERROR=ON >/dev/null
  cmake --build "$FUZZ_DIR" -j"$(nproc)" --target fuzzers
  echo "=== ctest -L fuzz ==="
  (cd "$FUZZ_DIR" && ctest -L '^fuzz$' --output-on-failure --no-tests=ignore --timeout 300) || status=1
fi
run kernel --timeout 3600
exit $status
