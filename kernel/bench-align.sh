#!/usr/bin/env bash
# Alignment benchmark in the QEMU guest (the `bench/align --vm` of the kernel part):
# writeback WRITE alignment vs FUSE bdi max_ratio, stock vs patched fuse.ko, 1 and 4
# writers, median of N runs. Writes docs/results/kernel-align.md and kernel-align.png.
# Usage: kernel/bench-align.sh [--server probe|stripefs] [--runs N] [--mib M]
#                              [--ratios LIST] [--writers LIST] [--mem MiB] [--outdir DIR]
#                              [--stripefs BIN] [--on-ratios LIST|-]
# Defaults: server probe (kernel/vm/fuse_probe), 3 runs, 128 MiB per run, ratios
# 1,5,10,20,40,70, writers 1,4, 2048 MiB guest.
# --server stripefs: the product itself (guest test product_align, coalescing off and on,
# files ending 100 KiB into a stripe; default 64 MiB per run, 4096 MiB guest: see
# docs/kernel.md for why 2 GiB is too small at max_ratio 1; coalescing-on runs at
# --on-ratios, default the same ratios, "-" none) with the stripefs binary of
# build/tools (or --stripefs / $STRIPEFS_BIN); writes kernel-align-stripefs.md and .png.
# Timings come from QEMU TCG (no KVM) and are not throughput figures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=3 mib="" ratios=1,5,10,20,40,70 writers=1,4 mem=2048 mem_set="" server=probe on_ratios=""
stripefs_bin=${STRIPEFS_BIN:-$here/../build/tools/stripefs}
outdir=$here/../docs/results
cmdline="kernel/bench-align.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --ratios) ratios=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --mem) mem=$2; mem_set=$2; shift 2 ;;
    --outdir) outdir=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --stripefs) stripefs_bin=$2; shift 2 ;;
    --on-ratios) on_ratios=$2; shift 2 ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
case "$server" in
  probe) test=align; name=kernel-align; mib=${mib:-128}; targs=("$ratios" "$writers" "$runs" "$mib")
    extra=() ;;
  stripefs) test=product_align; name=kernel-align-stripefs; mib=${mib:-64}
    targs=("$ratios" "$writers" "${on_ratios:-$ratios}" "$runs" "$mib" 100 0); mem=${mem_set:-4096}
    [ -x "$stripefs_bin" ] || { echo "bench-align: $stripefs_bin is not built: run \`cmake --build build --target stripefs\` or pass --stripefs BIN" >&2; exit 2; }
    extra=(--stripefs "$stripefs_bin") ;;
  *) echo "bench-align: --server probe|stripefs, not $server" >&2; exit 2 ;;
esac
"$here/build.sh" >/dev/null
work=$(mktemp -d /tmp/stripefs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
for m in stock patched; do
  rc=0
  "$here/vm/run.sh" --module "$m" --mem "$mem" --timeout 5400 --out "$work/$m.log" \
    "${extra[@]}" "$test" "${targs[@]}" > /dev/null || rc=$?
  if [ ! -s "$work/$m.log" ]; then
    echo "bench-align: ERROR: the $m guest did not run (rc=$rc)" >&2
    exit 1
  fi
  echo "bench-align: $m guest finished rc=$rc ($(grep -c "RESULT $test" "$work/$m.log") runs)" >&2
  [ "$rc" = 0 ] || [ "$m" = stock ] || echo "bench-align: WARNING: patched run reported failures" >&2
done
mkdir -p "$outdir"
report=align_report.py
meta=()
if [ "$server" = stripefs ]; then
  report=product_align_report.py
  commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$here" diff --quiet HEAD 2>/dev/null || commit="$commit+local changes"
  meta=(--meta "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit $commit with \`$cmdline\`; host load average at the end: $(cut -d' ' -f1-3 /proc/loadavg).")
fi
/usr/bin/python3 "$here/vm/$report" --stock "$work/stock.log" --patched "$work/patched.log" \
  --md "$outdir/$name.md" --png "$outdir/$name.png" \
  --raw "$outdir/$name-raw.txt" --wall "$(( $(date +%s) - t0 ))" "${meta[@]}"
echo "bench-align: wrote $outdir/$name.md and $name.png" >&2
