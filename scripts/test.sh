#!/usr/bin/env bash
# Runs every stripefs test: installs what is missing, builds, then runs the ctest groups in
# turn: unit, integration, fuzz (clang build) and kernel (QEMU guest). The guest kernel
# (kernel/build.sh, cached outside the repo) is built in the background from the start, so a
# cold kernel build overlaps the other groups; its log is kept and a failed build fails the
# kernel group. Ends with passed/failed/skipped per group (scripts/ctest_report.py).
# Exits non-zero if a test fails, if a group has no tests, if LABEL is not one of the
# README's labels, or if a test skipped for a reason that does not hold on this machine.
# Usage: scripts/test.sh [-L LABEL]     Env: BUILD_DIR, FUZZ_DIR, TEST_LOG_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$top/build}
FUZZ_DIR=${FUZZ_DIR:-$top/build-fuzz}
logs=${TEST_LOG_DIR:-$BUILD_DIR/test-logs}
t0=$(date +%s)
say() { echo "test.sh: [$(( $(date +%s) - t0 )) s] $*"; }

# The groups are the README's ctest labels; anything else is a typo or a stale doc.
labels=$(sed -n 's/.*ctest labels \([a-z, ]*\)).*/\1/p' "$top/README.md" | head -1 | tr -d ' ' |
  tr , ' ')
[ -n "$labels" ] || { echo "test.sh: README.md lists no 'ctest labels ...'" >&2; exit 2; }
label=""
if [ "${1:-}" = "-L" ]; then
  label=${2:?"usage: scripts/test.sh [-L LABEL]"}
  case " $labels " in *" $label "*) ;; *)
    echo "test.sh: unknown label '$label' (README.md: $labels)" >&2; exit 2 ;;
  esac
elif [ $# -gt 0 ]; then
  echo "usage: scripts/test.sh [-L LABEL]" >&2; exit 2
fi
wants() { [ -z "$label" ] || [ "$label" = "$1" ]; }
rm -rf "$logs"
mkdir -p "$logs"

kernel_opt=()
wants kernel && kernel_opt=(--with-kernel)
"$top/scripts/install-deps.sh" "${kernel_opt[@]}"

# Guest kernel in the background (nice'd inside kernel/build.sh); waited for before the
# kernel group. Its own session (setsid does not fork here: a background job of a script is
# no group leader), so that an early exit stops the whole build, make included.
kbuild_pid=""
stop_kbuild() { [ -z "$kbuild_pid" ] || kill -- -"$kbuild_pid" 2>/dev/null || true; }
trap stop_kbuild EXIT
if wants kernel; then
  say "guest kernel build started in the background (log: $logs/kernel-build.log)"
  setsid "$top/kernel/build.sh" > "$logs/kernel-build.log" 2>&1 < /dev/null &
  kbuild_pid=$!
fi

"$top/scripts/build.sh" --quiet "${kernel_opt[@]}"
say "build done"

# A test whose label is not a README group would never run: that is an error too.
stray=""
for l in $(cd "$BUILD_DIR" && ctest --print-labels | sed -n 's/^  *//p'); do
  case " $labels " in *" $l "*) ;; *) stray="$stray $l" ;; esac
done
[ -z "$stray" ] ||
  echo "test.sh: FAIL: tests labelled${stray}, which no group runs (README.md: $labels)" >&2

reports=()
# group LABEL DIR [ctest args...]: runs one group, keeps its JUnit file for the report.
group() {
  local l=$1 dir=$2; shift 2
  say "=== ctest -L $l ==="
  (cd "$dir" && ctest -L "^$l\$" --no-tests=error --output-on-failure \
    --test-output-size-passed 65536 --test-output-size-failed 1048576 \
    --output-junit "$logs/$l.xml" "$@") || true
  reports+=("$l=$logs/$l.xml")
}
wants unit && group unit "$BUILD_DIR" -j"$(nproc)" --timeout 600
wants integration && group integration "$BUILD_DIR" --timeout 900
# soak: full-size runs too long for CI (e.g. 100k entries in one etcd
# directory); only when asked for with -L soak.
if [ "$label" = soak ]; then group soak "$BUILD_DIR" --timeout 3600; fi

# Fuzzers need clang's libFuzzer: a separate build dir with STRIPEFS_FUZZ=ON.
if wants fuzz; then
  if CC=clang CXX=clang++ cmake -S "$top" -B "$FUZZ_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIPEFS_FUZZ=ON -DSTRIPEFS_WERROR=ON \
      -DSTRIPEFS_SKIP= > "$logs/fuzz-cmake.log" &&
    cmake --build "$FUZZ_DIR" -j"$(nproc)" --target fuzzers; then
    group fuzz "$FUZZ_DIR" --timeout 600
  else
    echo "test.sh: FAIL: the fuzz build failed" >&2
    reports+=("fuzz=-")
  fi
fi

if wants kernel; then
  say "waiting for the guest kernel build"
  kbuild_rc=0
  wait "$kbuild_pid" || kbuild_rc=$?
  kbuild_pid=""
  if [ $kbuild_rc = 0 ]; then
    say "guest kernel ready: $(tail -1 "$logs/kernel-build.log")"
    group kernel "$BUILD_DIR" --timeout 3600
  else
    tail -40 "$logs/kernel-build.log" >&2
    echo "test.sh: FAIL: kernel/build.sh exited $kbuild_rc (log: $logs/kernel-build.log)" >&2
    reports+=("kernel=-")
  fi
fi

say "finished; logs and JUnit files in $logs"
rc=0
python3 "$top/scripts/ctest_report.py" "${reports[@]}" || rc=1
[ -z "$stray" ] || { echo "FAIL: tests labelled${stray} are in no group"; rc=1; }
exit $rc
