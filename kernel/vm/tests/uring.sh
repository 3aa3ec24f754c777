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
# Every phase also fails unless its writer succeeds and the server saw all of its bytes.
#   local:  needs >= 4 CPUs; patched: an overflowing background burst goes back to the
#           submitter's queue 0 before farther queues, so queue 0 gets WRITEs and queue 3
#           (beyond the retry budget after queue 0 and 2) gets none.
. ./lib.sh
phases=${1:-bg,spread}
P=/sys/module/fuse/parameters
echo Y > $P/enable_uring || { echo "FAIL: cannot enable io-uring"; exit 1; }
has_params=0
[ -e $P/uring_queue_threshold ] && has_params=1
ncpu=$(grep -c ^processor /proc/cpuinfo)
[ "$ncpu" -ge 2 ] || { echo "FAIL: the io-uring queue tests need >= 2 guest CPUs, got $ncpu"; exit 1; }
echo "CONFIG uring module=$MODULE cpus=$ncpu spread_params=$has_params"

# Keep writeback out of the flusher threads: it must happen in the pinned fsync caller.
set_knob /proc/sys/vm/dirty_writeback_centisecs 0
set_knob /proc/sys/vm/dirty_expire_centisecs 360000

BURST=8388608  # bytes of the dio_check --burst runs: 64 async 128 KiB O_DIRECT writes

# qcount Q: number of writeback WRITEs served on queue Q.
qcount() { grep '^WRITE ' $PROBE_LOG | grep -c " qid=$1 " || true; }

run_writer() { # MiB
  bdi=$(bdi_dir)
  set_knob "$bdi/max_ratio" 100
  echo 0 > "$bdi/strict_limit" 2>/dev/null || true
  must taskset -c 0 dd if=/dev/zero of=$MNT/q bs=1M count="$1" conv=fsync 2>/dev/null
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
      [ $has_params = 1 ] && set_knob $P/uring_queue_threshold 0
      start_probe --uring --queue-depth 4 --log-all
      grep -q 'uring=1' $PROBE_LOG || { echo "FAIL: io-uring not negotiated"; fail=1; }
      run_writer 16
      stop_probe
      report bg
      expect_writes 16777216
      total=$(grep -c '^WRITE ' $PROBE_LOG || true)
      q0=$(qcount 0)
      if [ "$MODULE" = patched ]; then
        [ $((q0 * 10)) -le "$total" ] || { echo "FAIL: $q0 of $total background WRITEs on the submitter's queue"; fail=1; }
      else
        [ $((q0 * 10)) -ge $((total * 9)) ] || { echo "FAIL: stock served only $q0 of $total on queue 0"; fail=1; }
      fi
      [ "$fsync_q" = 0 ] || { echo "FAIL: FSYNC (foreground) served on queue $fsync_q, not 0"; fail=1; }
      ;;
    spread)
      [ $has_params = 1 ] && { set_knob $P/uring_queue_threshold 2; set_knob $P/uring_queue_retries 2; }
      start_probe --uring --queue-depth 1 --write-delay-us 20000 --log-all
      grep -q 'uring=1' $PROBE_LOG || { echo "FAIL: io-uring not negotiated"; fail=1; }
      must taskset -c 0 dio_check $MNT/burst --burst --size $BURST
      stop_probe
      report spread
      expect_writes $BURST '/ cache=0 /'
      total=$(grep -c '^WRITE ' $PROBE_LOG || true)
      [ "$total" -ge $((BURST / 131072)) ] || { echo "FAIL: $total WRITEs for a burst of $((BURST / 131072))"; fail=1; }
      q0=$(qcount 0); q1=$(qcount 1)
      if [ "$MODULE" = patched ]; then
        [ $((q0 * 5)) -ge "$total" ] && [ $((q1 * 5)) -ge "$total" ] ||
          { echo "FAIL: burst not spread (q0=$q0 q1=$q1 of $total)"; fail=1; }
      fi
      ;;
    local)
      [ "$ncpu" -ge 4 ] || { echo "FAIL: phase local needs >= 4 CPUs (run.sh --smp 4)"; fail=1; continue; }
      [ $has_params = 1 ] && { set_knob $P/uring_queue_threshold 2; set_knob $P/uring_queue_retries 2; }
      start_probe --uring --queue-depth 1 --write-delay-us 20000 --log-all
      grep -q 'uring=1' $PROBE_LOG || { echo "FAIL: io-uring not negotiated"; fail=1; }
      must taskset -c 0 dio_check $MNT/burst --burst --size $BURST
      stop_probe
      report local
      expect_writes $BURST '/ cache=0 /'
      q0=$(qcount 0); q3=$(qcount 3)
      if [ "$MODULE" = patched ]; then
        [ "$q0" -gt 0 ] && [ "$q3" = 0 ] ||
          { echo "FAIL: overflow did not prefer the submitter's queue (q0=$q0 q3=$q3)"; fail=1; }
      fi
      ;;
    *) echo "FAIL: unknown phase $phase"; fail=1 ;;
  esac
done
finish
