#!/usr/bin/env bash
# CI entry point of the kernel part: builds (cached) the guest kernel, stock and patched
# fuse.ko, checks the patch series with checkpatch, and runs every VM test.
# Usage: kernel/ci.sh [--no-tests] [--bench]
#   --no-tests  only build and checkpatch
#   --bench     also run the alignment benchmark (kernel/bench-align.sh, ~minutes)
# The product_* tests boot the stripefs binary in the guest: $STRIPEFS_BIN, else
# build/tools/stripefs of this checkout (build it first; missing, they fail).
# Exit status: 0 all passed, 1 a build step or test failed, 77 qemu unavailable (skipped).
# Runtime: cold = the guest kernel build (58 min wall at load 11-23, ~14 min CPU; see
# docs/kernel.md) + the VM tests (~5 min warm for the 12 probe tests; the 11 product tests
# add an estimated ~11 min on a quiet machine, of which product_compound 59 s at load ~6
# and product_uring_reduced (8 vCPUs) 119 s patched at load ~15, 84 s stock; see
# docs/kernel.md).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
run_tests=1 bench=0
for a in "$@"; do
  case "$a" in
    --no-tests) run_tests=0 ;;
    --bench) bench=1 ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
  esac
done
t0=$(date +%s)
if ! "$here/build.sh" --check-patches > /dev/null; then
  echo "kernel/ci: FAIL: build or checkpatch (see messages above)" >&2
  exit 1
fi
echo "kernel/ci: build ready after $(( $(date +%s) - t0 )) s" >&2
[ $run_tests = 1 ] || exit 0
if ! command -v qemu-system-x86_64 > /dev/null; then
  echo "kernel/ci: SKIP: qemu-system-x86_64 is not installed; VM tests not run" >&2
  exit 77
fi

# name module smp mem(MiB) test args... (same as tests/kernel/CMakeLists.txt)
tests=(
  "negotiation stock 2 1024 negotiation"
  "negotiation patched 2 1024 negotiation"
  "align stock 2 2048 align 1,10,70 1,4 1 64 20 99 100"
  "align patched 2 2048 align 1,10,70 1,4 1 64 20 99 100"
  "align_many patched 2 2048 align 1 8 1 64 20 0 100"
  "hold stock 2 1024 hold"
  "hold patched 2 1024 hold"
  "dio stock 2 1024 dio 20"
  "dio patched 2 1024 dio 20"
  "uring stock 2 1024 uring bg,spread"
  "uring patched 2 1024 uring bg,spread"
  "uring_local patched 4 1024 uring local"
  "product_negotiation stock 2 1024 product_negotiation"
  "product_negotiation patched 2 1024 product_negotiation"
  "product_align stock 2 4096 product_align 1,10,70 1,4 10 1 32 100 99"
  "product_align patched 2 4096 product_align 1,10,70 1,4 10 1 32 100 99"
  "product_dio stock 2 1024 product_dio 20"
  "product_dio patched 2 1024 product_dio 20"
  "product_uring stock 2 1024 product_uring bg,burst"
  "product_uring patched 2 1024 product_uring bg,burst"
  "product_compound patched 2 1024 product_compound 50"
  "product_uring_reduced patched 8 1024 product_uring_reduced reduced,full 2 20 1"
  "product_uring_reduced stock 8 1024 product_uring_reduced reduced 2 20 1"
)
# The same probe tests on each distribution kernel line, and the product tests
# (tests/kernel/CMakeLists.txt; FIRST_SPLIT=1: docs/kernel.md, "Kernel lines").
line_tests=(
  "negotiation stock 2 1024 negotiation"
  "negotiation patched 2 1024 negotiation"
  "align stock 2 2048 align 1,10,70 1,4 1 64 20 0 100 1"
  "align patched 2 2048 align 1,10,70 1,4 1 64 20 0 100 1"
  "dio stock 2 1024 dio 20 1"
  "dio patched 2 1024 dio 20 1"
  "hold stock 2 1024 hold"
  "hold patched 2 1024 hold"
  "product_negotiation stock 2 1024 product_negotiation"
  "product_negotiation patched 2 1024 product_negotiation"
  "product_dio patched 2 1024 product_dio 20"
  "product_align patched 2 4096 product_align 1,10,70 1,4 10 1 32 100 0 1"
)
# debian13 (FUSE built into Debian's kernel): the rebuilt 6.12 guest, without hold.
line_tests_debian13=(
  "negotiation stock 2 1024 negotiation"
  "negotiation patched 2 1024 negotiation"
  "align stock 2 2048 align 1,10,70 1,4 1 64 20 0 100 1"
  "align patched 2 2048 align 1,10,70 1,4 1 64 20 0 100 1"
  "dio stock 2 1024 dio 20 2"
  "dio patched 2 1024 dio 20 2"
  "product_negotiation stock 2 1024 product_negotiation"
  "product_negotiation patched 2 1024 product_negotiation"
  "product_dio patched 2 1024 product_dio 20"
  "product_align patched 2 4096 product_align 1,10,70 1,4 10 1 32 100 0 1"
)
lines=${STRIPEFS_KERNEL_LINES-debian12 debian13}
logdir=${STRIPEFS_KERNEL_CI_LOGS:-$(mktemp -d /tmp/stripefs-kernel-ci.XXXXXX)}
mkdir -p "$logdir"
pass=0 failed=() skipped=0
# Which patches each kernel line carries, lacks, and why (docs/kernel.md, "Kernel lines").
"$here/compare-lines" --check >&2 || failed+=(compare-lines)
run_one() { # LINE|"" name module smp mem test args...
  local line=$1 name=$2 module=$3 smp=$4 mem=$5 tag rc st results ts
  shift 5
  tag=${line:+$line-}$name-$module
  ts=$(date +%s)
  "$here/vm/run.sh" --module "$module" ${line:+--line "$line"} --smp "$smp" --mem "$mem" \
    --timeout 900 --out "$logdir/$tag.log" "$@" > /dev/null 2> "$logdir/$tag.err"
  rc=$?
  results=$(grep -a '^RESULT' "$logdir/$tag.log" 2>/dev/null | tr -d '\r' | head -8)
  case $rc in
    0) pass=$((pass + 1)); st=PASS ;;
    77) skipped=$((skipped + 1)); st=SKIP ;;
    *) failed+=("$tag"); st="FAIL(rc=$rc)" ;;
  esac
  echo "kernel/ci: $st ${line:+$line }$name ($module) $(( $(date +%s) - ts )) s" >&2
  [ -n "$results" ] && echo "$results" | sed 's/^/    /' >&2
  [ "$st" = PASS ] || grep -a 'FAIL' "$logdir/$tag.log" 2>/dev/null | head -5 | sed 's/^/    /' >&2
}
for t in "${tests[@]}"; do
  # shellcheck disable=SC2086
  run_one "" $t
done
for line in $lines; do
  tl=$(date +%s)
  builder=("$here/lines/build-line.sh" "$line")
  tests_of_line=("${line_tests[@]}")
  if grep -qx 'LINE_BUILDER=kernel/build.sh' "$here/lines/$line/line.conf"; then
    builder=("$here/build.sh" --line "$line")
    tests_of_line=("${line_tests_debian13[@]}")
  fi
  if ! "${builder[@]}" --check-patches > /dev/null; then
    echo "kernel/ci: FAIL: line $line: ${builder[0]##*/} (see messages above)" >&2
    failed+=("$line-build")
    continue
  fi
  echo "kernel/ci: line $line ready after $(( $(date +%s) - tl )) s" >&2
  for t in "${tests_of_line[@]}"; do
    # shellcheck disable=SC2086
    run_one "$line" $t
  done
  echo "kernel/ci: line $line done in $(( $(date +%s) - tl )) s" >&2
done
# DKMS: the stripefs-fuse-dkms package, `dkms build` against each line's headers, and the
# DKMS-built fuse.ko booted on the line's kernel (negotiation: alignment acknowledged).
if [ -n "$lines" ]; then
  td=$(date +%s)
  if dkms_kos=$("$root/packaging/dkms/ci-dkms.sh" "$logdir/dkms"); then
    echo "kernel/ci: PASS dkms build $(( $(date +%s) - td )) s" >&2
    while read -r line ko; do
      [ -n "$line" ] || continue
      run_one "$line" negotiation-dkms patched 2 1024 --ko "$ko" negotiation
    done <<< "$dkms_kos"
  else
    rc=$?
    if [ $rc = 77 ]; then skipped=$((skipped + 1)); echo "kernel/ci: SKIP dkms (not installed)" >&2
    else failed+=(dkms-build); echo "kernel/ci: FAIL dkms build" >&2; fi
  fi
fi
if [ $bench = 1 ]; then
  "$here/bench-align.sh" || failed+=(bench-align)
fi
echo "kernel/ci: $pass passed, ${#failed[@]} failed, $skipped skipped in $(( $(date +%s) - t0 )) s; logs in $logdir" >&2
[ ${#failed[@]} = 0 ] || { echo "kernel/ci: failed: ${failed[*]}" >&2; exit 1; }
[ $pass -gt 0 ] || exit 77
exit 0
