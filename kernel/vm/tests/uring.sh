# FUSE-over-io-uring queue selection (patches 2-4), served by fuse_probe with one ring
# queue per CPU. Writers are pinned to CPU 0, so background requests are queued there.
# Args: PHASES (comma list of: bg, spread, local; default bg,spread)
#   bg:     load spreading off (uring_queue_threshold=0 where the parameter exists);
#           stock serves >= 90 % of the WRITEs on queue 0 (the submitter's core),
#           patched >= 90 % on another queue. The FSYNC itself stays on queue 0.
#   spread: a burst of 64 async O_DIRECT writes (io_uring, background FUSE requests) from
#           CPU 0 to a slow server (20 ms per WRITE, 1 ring entry per queue),
#           threshold 2: patched
#           serves >= 20 % of the WRITEs on each of queues 0 and 1 (stock recorded only).
#   local:  needs >= 4 CPUs; patched: an overflowing background burst goes back to the
#           submitter's queue 0 before farther queues, so queue 0 gets WRITEs and queue 3
#           (beyond the retry budget after queue 0 and 2) gets none.
. ./lib.sh
phases=${1:-bg,spread}
fail=0
P=/sys/module/fuse/parameters
echo Y > $P/enable_uring || { echo "FAIL: cannot enable io-uring"; exit 1; }
has_params=0
[ -e $P/uring_queue_threshold ] && has_params=1
ncpu=$(grep -c ^processor /proc/cpuinfo)
[ "$ncpu" -ge 2 ] || { echo "FAIL: the io-uring queue tests need >= 2 guest CPUs, got $ncpu"; exit 1; }
echo "CONFIG uring module=$MODULE cpus=$ncpu spread_params=$has_params"

# Keep writeback out of the flusher threads: it must happen in the pinned fsync caller.
echo 0 > /proc/sys/vm/dirty_writeback_centisecs
echo 360000 > /proc/sys/vm/dirty_expire_centisecs

# qcount Q: number of writeback WRITEs served on queue Q.
qcount() { grep '^WRITE ' $PROBE_LOG | grep -c " qid=$1 " || true; }

run_writer() { # MiB
  bdi=$(bdi_dir)
  echo 100 > "$bdi/max_ratio"
  echo 0 > "$bdi/strict_limit" 2>/dev/null || true
  taskset -c 0 dd if=/dev/zero of=$MNT/q bs=1M count="$1" conv=fsync 2>/dev/null
}

report() { # phase
  total=$(grep -c '^WRITE ' $PROBE_LOG || true)
  line="RESULT uring phase=$1 module=$MODULE writes=$total"
  q=0
  while [ $q -lt $ncpu ]; do line="$line q$q=$(qcount $q)"; q=$((q + 1)); done
  fsync_q=$(grep '^REQ op=20 ' $PROBE_LOG | head -1 | sed -n 's/.* qid=\([-0-9]*\).*/\1/p')
  echo "$line fsync_qid=$fsync_q"
}

for phase in $(echo $phases | tr , ' '); do
  case $phase in
    bg)
      [ $has_params = 1 ] && echo 0 > $P/uring_queue_threshold
      start_probe --uring --queue-depth 4 --log-all
      grep -q 'uring=1' $PROBE_LOG || { echo "FAIL: io-uring not negotiated"; fail=1; }
      run_writer 16
      stop_probe
      report bg
      total=$(grep -c '^WRITE ' $PROBE_LOG || true)
      q0=$(qcount 0)
      [ "$total" -ge 8 ] || { echo "FAIL: only $total WRITEs"; fail=1; }
      if [ "$MODULE" = patched ]; then
        [ $((q0 * 10)) -le "$total" ] || { echo "FAIL: $q0 of $total background WRITEs on the submitter's queue"; fail=1; }
      else
        [ $((q0 * 10)) -ge $((total * 9)) ] || { echo "FAIL: stock served only $q0 of $total on queue 0"; fail=1; }
      fi
      [ "$fsync_q" = 0 ] || { echo "FAIL: FSYNC (foreground) served on queue $fsync_q, not 0"; fail=1; }
      ;;
    spread)
      [ $has_params = 1 ] && { echo 2 > $P/uring_queue_threshold; echo 2 > $P/uring_queue_retries; }
      start_probe --uring --queue-depth 1 --write-delay-us 20000 --log-all
      taskset -c 0 dio_check $MNT/burst --burst --size 8388608
      stop_probe
      report spread
      total=$(grep -c '^WRITE ' $PROBE_LOG || true)
      q0=$(qcount 0); q1=$(qcount 1)
      if [ "$MODULE" = patched ]; then
        [ $((q0 * 5)) -ge "$total" ] && [ $((q1 * 5)) -ge "$total" ] ||
          { echo "FAIL: burst not spread (q0=$q0 q1=$q1 of $total)"; fail=1; }
      fi
      ;;
    local)
      [ "$ncpu" -ge 4 ] || { echo "FAIL: phase local needs >= 4 CPUs (run.sh --smp 4)"; fail=1; continue; }
      [ $has_params = 1 ] && { echo 2 > $P/uring_queue_threshold; echo 2 > $P/uring_queue_retries; }
      start_probe --uring --queue-depth 1 --write-delay-us 20000 --log-all
      taskset -c 0 dio_check $MNT/burst --burst --size 8388608
      stop_probe
      report local
      q0=$(qcount 0); q3=$(qcount 3)
      if [ "$MODULE" = patched ]; then
        [ "$q0" -gt 0 ] && [ "$q3" = 0 ] ||
          { echo "FAIL: overflow did not prefer the submitter's queue (q0=$q0 q3=$q3)"; fail=1; }
      fi
      ;;
    *) echo "FAIL: unknown phase $phase"; fail=1 ;;
  esac
done
[ $fail = 0 ] && echo PASS
exit $fail
