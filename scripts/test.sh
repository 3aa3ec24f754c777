#!/usr/bin/env bash
# Runs every stripefs test: installs what is missing, builds, then runs the ctest groups in
# turn: unit, integration, fuzz (a clang ASan+UBSan build tree), sanitize (the unit group
# again in that clang tree) and kernel (QEMU guest). The guest kernels (kernel/build.sh:
# the 7.2 guest, then the debian13 line's 6.12 guest; cached outside the repo) are built in
# the background from the start, so a cold kernel build overlaps the other groups; their logs
# are kept and a failed 7.2 build fails the kernel group. Ends with passed/failed/skipped per group (scripts/ctest_report.py).
# Exits non-zero if a test fails, if a group has no tests or fewer cases than its minimum in
# tests/min-counts.txt, if a registered test has no group's label, if LABEL is not one of
# the README's labels (or sanitize), or if a test skipped for a reason that does not hold on
# this machine.
# Usage: scripts/test.sh [-L LABEL|-L sanitize]     Env: BUILD_DIR, FUZZ_DIR, TEST_LOG_DIR
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
  label=${2:?"usage: scripts/test.sh [-L LABEL|-L sanitize]"}
  case " $labels sanitize " in *" $label "*) ;; *)
    echo "test.sh: unknown label '$label' (README.md: $labels; or sanitize)" >&2; exit 2 ;;
  esac
elif [ $# -gt 0 ]; then
  echo "usage: scripts/test.sh [-L LABEL|-L sanitize]" >&2; exit 2
fi
wants() { [ -z "$label" ] || [ "$label" = "$1" ]; }
# The sanitize group (the unit group again under ASan+UBSan, LeakSanitizer on) runs by
# default and with -L sanitize; it passed end to end on 2026-12-07 (565 cases, 86 s of tests
# on 2 loaded cores; its clang build of the unit tests is the larger cost).
wants_sanitize() { [ -z "$label" ] || [ "$label" = sanitize ]; }
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
  # Then the debian13 line's rebuilt 6.12 guest (its own log; a failure there fails only
  # the kernel_debian13_build entry of the kernel group, which builds it again).
  setsid bash -c '"$1/kernel/build.sh" > "$2/kernel-build.log" 2>&1 || exit
    "$1/kernel/build.sh" --line debian13 > "$2/kernel-build-debian13.log" 2>&1 || true' \
    - "$top" "$logs" < /dev/null &
  kbuild_pid=$!
fi

"$top/scripts/build.sh" --quiet "${kernel_opt[@]}"
say "build done"

# Every registered test must carry a label some group runs (one without would never run).
labels_ok=1
python3 "$top/scripts/ctest_report.py" --check-labels "$BUILD_DIR" $labels || labels_ok=0

reports=()
# Stale gtest XML goes once, before any group: several groups share BUILD_DIR's gtest-xml/,
# and a group must not delete the files of one that ran before it (the kernel group did
# that to the integration group's, and the report then failed six suites as "no XML").
rm -f "$BUILD_DIR"/gtest-xml/*.xml "$FUZZ_DIR"/gtest-xml/*.xml
# group NAME LABEL DIR [ctest args...]: runs the tests labelled LABEL in DIR as group NAME,
# keeps its JUnit file (and DIR's gtest XML files) for the report.
group() {
  local name=$1 l=$2 dir=$3; shift 3
  say "=== $name: ctest -L $l in $dir ==="
  (cd "$dir" && ctest -L "^$l\$" --no-tests=error --output-on-failure \
    --test-output-size-passed 65536 --test-output-size-failed 1048576 \
    --output-junit "$logs/$name.xml" "$@") || true
  reports+=("$name=$logs/$name.xml@$dir")
  say "=== $name done ==="
}
wants unit && group unit unit "$BUILD_DIR" -j"$(nproc)" --timeout 600
wants integration && group integration integration "$BUILD_DIR" --timeout 900
# soak: full-size runs too long for CI (e.g. 100k entries in one etcd
# directory); only when asked for with -L soak.
if [ "$label" = soak ]; then group soak soak "$BUILD_DIR" --timeout 3600; fi

# One clang tree with ASan+UBSan everywhere (STRIPEFS_SANITIZE) and libFuzzer
# (STRIPEFS_FUZZ): it builds the fuzz targets (fuzz group) and the unit tests, which run
# again there as group "sanitize" (a use-after-free or UB that passes the RelWithDebInfo
# run fails here). Clang also shows the warnings only clang has (-Wthread-safety).
if wants fuzz || wants_sanitize; then
  targets=()
  wants fuzz && targets+=(fuzzers)
  # The sanitize pass builds the `stripefs` binary too (the CLI and daemons,
  # which no unit test links), so every production file passes clang's
  # -Werror=thread-safety (CMakeLists.txt).
  wants_sanitize && targets+=(unit_tests stripefs)
  say "clang ASan+UBSan build of ${targets[*]} in $FUZZ_DIR"
  if CC=clang CXX=clang++ cmake -S "$top" -B "$FUZZ_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIPEFS_FUZZ=ON -DSTRIPEFS_SANITIZE=ON \
      -DSTRIPEFS_WERROR=ON -DSTRIPEFS_SKIP= > "$logs/fuzz-cmake.log" &&
    cmake --build "$FUZZ_DIR" -j"$(nproc)" --target "${targets[@]}"; then
    say "clang build done"
    wants fuzz && group fuzz fuzz "$FUZZ_DIR" --timeout 600
    # halt_on_error: code built without -fno-sanitize-recover stops too.
    wants_sanitize && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      ASAN_OPTIONS=detect_leaks=1 group sanitize unit "$FUZZ_DIR" -j"$(nproc)" --timeout 900
  else
    echo "test.sh: FAIL: the clang sanitizer/fuzz build failed" >&2
    wants fuzz && reports+=("fuzz=-")
    wants_sanitize && reports+=("sanitize=-")
  fi
fi

if wants kernel; then
  say "waiting for the guest kernel build"
  kbuild_rc=0
  wait "$kbuild_pid" || kbuild_rc=$?
  kbuild_pid=""
  if [ $kbuild_rc = 0 ]; then
    say "guest kernel ready: $(tail -1 "$logs/kernel-build.log")"
    group kernel kernel "$BUILD_DIR" --timeout 3600
  else
    tail -40 "$logs/kernel-build.log" >&2
    echo "test.sh: FAIL: kernel/build.sh exited $kbuild_rc (log: $logs/kernel-build.log)" >&2
    reports+=("kernel=-")
  fi
fi

say "finished; logs and JUnit files in $logs"
rc=0
python3 "$top/scripts/ctest_report.py" --min-counts "$top/tests/min-counts.txt" \
  "${reports[@]}" || rc=1
[ $labels_ok = 1 ] || { echo "FAIL: some tests carry no group's label (above)"; rc=1; }
exit $rc
