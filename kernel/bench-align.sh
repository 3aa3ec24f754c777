#!/usr/bin/env bash
# Alignment benchmark in the QEMU guest (the `bench/align --vm` of the kernel part):
# writeback WRITE alignment vs FUSE bdi max_ratio, stock vs patched fuse.ko, 1 and 4
# writers, median of N runs. Writes docs/results/kernel-align.md and kernel-align.png.
# Usage: kernel/bench-align.sh [--runs N] [--mib M] [--ratios LIST] [--writers LIST]
#                              [--mem MiB] [--outdir DIR]
# Defaults: 3 runs, 128 MiB per run, ratios 1,5,10,20,40,70, writers 1,4, 2048 MiB guest.
# Timings come from QEMU TCG (no KVM) and are not throughput figures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=3 mib=128 ratios=1,5,10,20,40,70 writers=1,4 mem=2048
outdir=$here/../docs/results
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --mib) mib=$2; shift 2 ;;
    --ratios) ratios=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --outdir) outdir=$2; shift 2 ;;
    *) sed -n '2,9p' "$0"; exit 2 ;;
  esac
done
"$here/build.sh" >/dev/null
work=$(mktemp -d /tmp/stripefs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
for m in stock patched; do
  rc=0
  "$here/vm/run.sh" --module "$m" --mem "$mem" --timeout 5400 --out "$work/$m.log" \
    align "$ratios" "$writers" "$runs" "$mib" > /dev/null || rc=$?
  if [ ! -s "$work/$m.log" ]; then
    echo "bench-align: ERROR: the $m guest did not run (rc=$rc)" >&2
    exit 1
  fi
  echo "bench-align: $m guest finished rc=$rc ($(grep -c 'RESULT align' "$work/$m.log") runs)" >&2
  [ "$rc" = 0 ] || [ "$m" = stock ] || echo "bench-align: WARNING: patched run reported failures" >&2
done
mkdir -p "$outdir"
/usr/bin/python3 "$here/vm/align_report.py" --stock "$work/stock.log" --patched "$work/patched.log" \
  --md "$outdir/kernel-align.md" --png "$outdir/kernel-align.png" \
  --raw "$outdir/kernel-align-raw.txt" --wall "$(( $(date +%s) - t0 ))"
echo "bench-align: wrote $outdir/kernel-align.md and kernel-align.png" >&2
