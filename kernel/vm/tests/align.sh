# Alignment of writeback WRITEs vs the FUSE bdi max_ratio, with 1 and N parallel writers.
# Args: [RATIOS (comma list)] [WRITERS (comma list)] [RUNS] [MIB per run] [ALIGN_ORDER]
#       [MIN_PCT] [EXTRA_KIB] [FIRST_SPLIT]
# Each writer writes MIB/WRITERS MiB (dd bs=1M) plus EXTRA_KIB KiB (so that the file ends
# mid-stripe), then everything is synced. Prints one "RESULT align ..." line per run.
# On the patched module (which asks for 1 MiB alignment) a run fails if any WRITE crosses a
# stripe boundary, or if MIN_PCT > 0 and fewer than MIN_PCT % of the WRITEs that are not
# short file-end WRITEs are aligned (aligned_xeof_pct), or, with FIRST_SPLIT=1, if any WRITE
# after a file's first stripe is neither a whole stripe nor the file end (split_later; kernels
# before the wb_thresh floor of __wb_calc_thresh(), 6.1 and 6.12, make writers on a fresh bdi
# stall after 32 pages, so a file's first stripe may go out in parts; docs/kernel.md).
# Stock is the recorded baseline. On
# both modules a run fails unless every dd succeeds and the writeback WRITEs cover exactly the
# bytes written, and unless alignment was acknowledged on patched and not on stock.
. ./lib.sh
ratios=${1:-1,10,70}
writers_list=${2:-1,4}
runs=${3:-1}
mib=${4:-64}
order=${5:-20}
min_pct=${6:-0}
extra_kib=${7:-0}
first_split=${8:-0}
echo "CONFIG align ratios=$ratios writers=$writers_list runs=$runs mib_per_run=$mib" \
  "extra_kib=$extra_kib min_pct=$min_pct first_split=$first_split" \
  "mem_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)" \
  "dirty_ratio=$(cat /proc/sys/vm/dirty_ratio) dirty_bg_ratio=$(cat /proc/sys/vm/dirty_background_ratio)"
for ratio in $(echo $ratios | tr , ' '); do
  for w in $(echo $writers_list | tr , ' '); do
    r=1
    while [ $r -le $runs ]; do
      start_probe --align-order "$order" --no-data
      bdi=$(bdi_dir)
      set_knob "$bdi/max_ratio" "$ratio"
      strict=$(cat "$bdi/strict_limit" 2>/dev/null || echo "?")
      per=$((mib / w))
      t0=$(date +%s)
      i=1
      pids=""
      while [ $i -le $w ]; do
        (
          dd if=/dev/zero of=$MNT/f$i bs=1M count=$per 2>/dev/null || exit 1
          if [ "$extra_kib" -gt 0 ]; then
            dd if=/dev/zero of=$MNT/f$i bs=1K seek=$((per * 1024)) count=$extra_kib \
              conv=notrunc 2>/dev/null || exit 1
          fi
        ) &
        pids="$pids $!"
        i=$((i + 1))
      done
      for p in $pids; do wait $p || { echo "FAIL: writer $p: dd failed"; fail=1; }; done
      must sync
      t1=$(date +%s)
      stop_probe
      st=$(write_stats)
      echo "RESULT align module=$MODULE max_ratio=$ratio strict_limit=$strict writers=$w run=$r mib=$mib extra_kib=$extra_kib tcg_seconds=$((t1 - t0)) $st"
      # Diagnosis: the first WRITEs that start mid-stripe, with the one before each.
      awk -v S="$STRIPE" '/^WRITE / && / cache=1 / { split($3, o, "="); if (o[2] % S) {
          if (n++ < 4) print "MISALIGNED after: " prev; if (n <= 4) print "MISALIGNED " $0 }
          prev = $0 }' "$PROBE_LOG"
      crossing=$(echo "$st" | sed -n 's/.*crossing=\([0-9]*\).*/\1/p')
      xpct=$(echo "$st" | sed -n 's/.*aligned_xeof_pct=\([0-9.]*\).*/\1/p')
      later=$(echo "$st" | sed -n 's/.*split_later=\([0-9]*\).*/\1/p')
      expect_writes $((w * (per * 1048576 + extra_kib * 1024)))
      if [ "$MODULE" = patched ]; then expect_ack 1; else expect_ack 0; fi
      if [ "$MODULE" = patched ] && [ "$order" -ge 12 ]; then
        if [ "$crossing" != 0 ]; then
          echo "FAIL: $crossing WRITEs cross a stripe boundary on the patched module"
          fail=1
        fi
        if [ "$min_pct" -gt 0 ] && ! awk -v x="$xpct" -v m="$min_pct" 'BEGIN { exit !(x >= m) }'; then
          echo "FAIL: only $xpct % of the WRITEs (without file-end ones) are aligned at max_ratio $ratio with $w writers, wanted >= $min_pct %"
          fail=1
        fi
        if [ "$first_split" = 1 ] && [ "$later" != 0 ]; then
          echo "FAIL: $later WRITEs after a file's first stripe are neither whole stripes nor the file end at max_ratio $ratio with $w writers"
          fail=1
        fi
      fi
      r=$((r + 1))
    done
  done
done
finish
