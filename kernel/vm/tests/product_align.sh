# Alignment through the product: stripefs (embedded volume on tmpfs, 1 MiB stripes) counts
# the shapes of the kernel's writeback WRITEs and of its own backend stripe writes, vs the
# bdi max_ratio (set by `stripefs mount --max-ratio`), with 1 and N parallel writers.
# Args: [RATIOS] [WRITERS] [ON_RATIOS] [RUNS] [MIB per run] [EXTRA_KIB] [MIN_PCT] [FIRST_SPLIT]
# Runs RATIOS x WRITERS with --coalesce=off, then ON_RATIOS x WRITERS with coalescing on
# (the default; ON_RATIOS "-": none).
# Each writer writes MIB/WRITERS MiB (dd bs=1M) plus EXTRA_KIB KiB so that its file ends
# mid-stripe, the last dd with conv=fsync. One "RESULT product_align ..." line per run.
# File ends: a file whose size is not a multiple of the stripe ends with one short WRITE and
# one partial backend stripe, so one of each per file is set aside ("xeof" figures).
# Every run fails unless every dd succeeds, the files have their sizes, the daemon saw at
# least the bytes written in at least as many WRITEs as that needs at its max_write,
# alignment was acknowledged on patched and not on stock, and the daemon exits 0. On patched with --coalesce=off: no WRITE crosses
# a stripe boundary, >= MIN_PCT % of the WRITEs apart from file ends are whole stripes, and
# every backend stripe write apart from file ends is a full stripe (and there are at least
# as many full-stripe encodes as whole stripes written). With FIRST_SPLIT=1 (kernels whose
# writers stall after 32 pages on a fresh bdi, 6.1 and 6.12: each file's first stripe may go
# out in parts, docs/kernel.md) the whole-stripe and full-stripe shares with coalescing off
# are recorded, not asserted (the crossing check stays). With coalescing on, on both modules:
# every backend stripe write apart from file ends is a full stripe. Stock with coalescing off
# is the recorded baseline.
. ./lib.sh
. ./product_lib.sh
ratios=${1:-1,10,70}
writers_list=${2:-1,4}
on_ratios=${3:-10}
runs=${4:-1}
mib=${5:-64}
extra_kib=${6:-100}
min_pct=${7:-99}
first_split=${8:-0}
echo "CONFIG product_align ratios=$ratios writers=$writers_list on_ratios=$on_ratios runs=$runs" \
  "mib_per_run=$mib extra_kib=$extra_kib min_pct=$min_pct first_split=$first_split" \
  "mem_kib=$(awk '/MemTotal/ {print $2}' /proc/meminfo)" \
  "dirty_ratio=$(cat /proc/sys/vm/dirty_ratio) dirty_bg_ratio=$(cat /proc/sys/vm/dirty_background_ratio)"
for mode in off on; do
  list=$ratios
  [ $mode = on ] && list=$on_ratios
  [ "$list" = - ] && continue
  for ratio in $(echo $list | tr , ' '); do
    for w in $(echo $writers_list | tr , ' '); do
      r=1
      while [ $r -le $runs ]; do
        sf_mount --coalesce="$mode" --max-ratio="$ratio"
        got_ratio=$(cat "$(bdi_dir)/max_ratio")
        [ "$got_ratio" = "$ratio" ] || { echo "FAIL: bdi max_ratio is $got_ratio, --max-ratio=$ratio"; fail=1; }
        per=$((mib / w))
        fsize=$((per * 1048576 + extra_kib * 1024))
        t0=$(date +%s)
        i=1
        pids=""
        while [ $i -le $w ]; do
          (
            if [ "$extra_kib" -gt 0 ]; then
              dd if=/dev/zero of=$MNT/f$i bs=1M count=$per 2>/dev/null || exit 1
              dd if=/dev/zero of=$MNT/f$i bs=1K seek=$((per * 1024)) count=$extra_kib \
                conv=notrunc,fsync 2>/dev/null || exit 1
            else
              dd if=/dev/zero of=$MNT/f$i bs=1M count=$per conv=fsync 2>/dev/null || exit 1
            fi
          ) &
          pids="$pids $!"
          i=$((i + 1))
        done
        for p in $pids; do wait $p || { echo "FAIL: writer $p: dd failed"; fail=1; }; done
        t1=$(date +%s)
        i=1
        while [ $i -le $w ]; do
          s=$(stat -c %s $MNT/f$i)
          [ "$s" = "$fsize" ] || { echo "FAIL: $MNT/f$i has $s bytes, wanted $fsize"; fail=1; }
          i=$((i + 1))
        done
        sf_stat
        expect_sf_ack
        reqs=$(jget writes.requests) al=$(jget writes.aligned) sal=$(jget writes.start_aligned)
        cross=$(jget writes.crossing) short=$(jget writes.short) wb=$(jget writes.writeback)
        bytes=$(jget writes.bytes) mw=$(jget negotiated.max_write) S=$(jget volume.stripe_size)
        bsw=$(jget backend.stripe_writes) bfull=$(jget backend.full_stripe_writes)
        eof=0
        [ "$extra_kib" -gt 0 ] && eof=$w
        xeof=$(pct "$al" $((reqs - eof)))
        bxeof=$(pct "$bfull" $((bsw - eof)))
        echo "RESULT product_align module=$MODULE coalesce=$mode max_ratio=$ratio writers=$w run=$r" \
          "mib=$mib extra_kib=$extra_kib tcg_seconds=$((t1 - t0)) total=$reqs aligned=$al" \
          "start_aligned=$sal crossing=$cross short=$short writeback=$wb bytes=$bytes" \
          "aligned_pct=$(pct "$al" "$reqs") aligned_xeof_pct=$xeof backend_stripes=$bsw" \
          "backend_full=$bfull backend_full_pct=$(pct "$bfull" "$bsw") backend_full_xeof_pct=$bxeof" \
          "partial_flushes=$(grep '^coalescing.partial_flushes' $STAT_FLAT | sed 's/^coalescing.partial_flushes.//' | grep -v '=0$' | tr '\n' ' ')"
        want=$((w * fsize))
        [ "$S" = 1048576 ] || { echo "FAIL: stripe size $S, the test assumes 1 MiB"; fail=1; }
        [ -n "$mw" ] && [ "$mw" -gt 0 ] || { echo "FAIL: no negotiated max_write"; fail=1; mw=1; }
        [ "$bytes" -ge "$want" ] && [ "$reqs" -ge $(( (want + mw - 1) / mw )) ] && [ "$wb" -ge $(( (want + mw - 1) / mw )) ] ||
          { echo "FAIL: the daemon saw $reqs WRITEs ($wb writeback) with $bytes bytes, wanted >= $want bytes in >= $(( (want + mw - 1) / mw ))"; fail=1; }
        if [ "$MODULE" = patched ] && [ "$mode" = off ]; then
          [ "$cross" = 0 ] || { echo "FAIL: $cross WRITEs cross a stripe boundary on the patched module"; fail=1; }
          if [ "$first_split" != 1 ]; then
            ge "$xeof" "$min_pct" ||
              { echo "FAIL: $xeof % of the WRITEs apart from file ends are whole stripes at max_ratio $ratio with $w writers, wanted >= $min_pct %"; fail=1; }
          fi
        fi
        if { [ "$MODULE" = patched ] && [ "$mode" = off ] && [ "$first_split" != 1 ]; } ||
           [ "$mode" = on ]; then
          [ "$bfull" -ge $((w * per)) ] ||
            { echo "FAIL: $bfull full-stripe encodes for $((w * per)) whole stripes written"; fail=1; }
          [ $((bsw - bfull)) -le "$eof" ] ||
            { echo "FAIL: $((bsw - bfull)) of $bsw backend stripe writes are not full stripes (file ends allowed: $eof), coalesce=$mode"; fail=1; }
        fi
        sf_umount
        r=$((r + 1))
      done
    done
  done
done
finish
