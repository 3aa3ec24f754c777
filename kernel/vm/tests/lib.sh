# Shared helpers for guest test scripts (busybox sh). Sourced, not run.
# A helper that finds a failure prints "FAIL: ..." and sets fail=1; the test ends with
# finish, which prints PASS only if nothing failed. A probe that cannot start ends the test.
MNT=/mnt
PROBE_LOG=/tmp/probe.log
STRIPE=${STRIPE:-1048576}
fail=0

# must CMD...: runs CMD; a non-zero exit status is a test failure. Returns CMD's status.
must() {
  "$@"
  rc=$?
  [ $rc = 0 ] || { echo "FAIL: '$*' exited $rc"; fail=1; }
  return $rc
}

# set_knob FILE VALUE: writes a sysfs/procfs knob; a refused write is a test failure.
set_knob() {
  echo "$2" > "$1" || { echo "FAIL: cannot write $2 to $1"; fail=1; }
}

# finish: PASS line and exit status of the test.
finish() {
  [ "$fail" = 0 ] && echo PASS
  exit "$fail"
}

# start_probe [fuse_probe options...]: mounts the probe server at $MNT.
start_probe() {
  fuse_probe "$MNT" --log "$PROBE_LOG" "$@" &
  PROBE_PID=$!
  i=0
  while ! grep -q " $MNT fuse" /proc/mounts; do
    i=$((i + 1))
    kill -0 "$PROBE_PID" 2>/dev/null || { echo "FAIL: fuse_probe $* exited before mounting"; exit 1; }
    [ $i -lt 100 ] || { echo "FAIL: probe did not mount"; exit 1; }
    sleep 0.1
  done
  # The mount is visible before INIT is answered; wait for the reply to be logged.
  i=0
  while ! grep -q INIT_REPLY "$PROBE_LOG" 2>/dev/null; do
    stat "$MNT" >/dev/null 2>&1 || true
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "FAIL: no INIT reply"; exit 1; }
    sleep 0.1
  done
}

# stop_probe: unmounts and waits for the server to write its summary; a failed unmount,
# a server that does not exit by itself or exits with an error is a test failure.
stop_probe() {
  umount "$MNT" || { echo "FAIL: umount $MNT failed"; fail=1; umount -l "$MNT"; }
  i=0
  while kill -0 "$PROBE_PID" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -ge 100 ]; then
      echo "FAIL: fuse_probe still running 10 s after the unmount"
      fail=1
      kill -9 "$PROBE_PID" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  wait "$PROBE_PID"
  rc=$?
  [ $rc = 0 ] || { echo "FAIL: fuse_probe exited with status $rc"; fail=1; }
  grep -q '^EXIT code=0' "$PROBE_LOG" || { echo "FAIL: fuse_probe did not log EXIT code=0"; fail=1; }
}

# expect_ack 0|1: the INIT reply in $PROBE_LOG asked for alignment and the kernel did
# (1) or did not (0) offer it, i.e. alignment is in effect only on the patched module.
expect_ack() {
  grep -q '^INIT_REPLY .*align_requested=1' "$PROBE_LOG" ||
    { echo "FAIL: the probe did not request alignment"; fail=1; }
  got=$(sed -n 's/^INIT_REPLY .*align_acknowledged=\([01]\).*/\1/p' "$PROBE_LOG")
  [ "$got" = "$1" ] || { echo "FAIL: align_acknowledged=$got on the $MODULE module, wanted $1"; fail=1; }
}

# covered_bytes [AWK_PATTERN]: bytes covered by the logged WRITEs matching the pattern
# (default: all), overlapping ranges counted once.
covered_bytes() {
  grep '^WRITE ' "$PROBE_LOG" | awk "${1:-1}" | awk '{
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print v["ino"], v["off"], v["off"] + v["size"] }' | sort -k1,1n -k2,2n |
    awk '$1 != ino || $2 > end { tot += end - start; ino = $1; start = $2; end = $3; next }
         $3 > end { end = $3 }
         END { printf "%.0f\n", tot + end - start }'
}

# expect_writes BYTES [AWK_PATTERN]: the WRITEs matching the pattern (default: writeback
# WRITEs, cache=1) cover exactly BYTES bytes, with at least as many WRITEs as BYTES needs at
# the negotiated max_write. An empty or short run fails here.
expect_writes() {
  pat=${2:-/ cache=1 /}
  mw=$(sed -n 's/^INIT_REPLY .* max_write=\([0-9]*\).*/\1/p' "$PROBE_LOG")
  [ -n "$mw" ] && [ "$mw" -gt 0 ] || { echo "FAIL: no max_write in the INIT reply"; fail=1; return; }
  n=$(grep '^WRITE ' "$PROBE_LOG" | awk "$pat" | wc -l)
  b=$(covered_bytes "$pat")
  min=$(( ($1 + mw - 1) / mw ))
  echo "WRITES match='$pat' count=$n bytes=$b expected_bytes=$1 min_count=$min"
  [ "$n" -ge "$min" ] && [ "$n" -gt 0 ] || { echo "FAIL: $n WRITEs matching $pat, wanted >= $min"; fail=1; }
  [ "$b" = "$1" ] || { echo "FAIL: WRITEs matching $pat cover $b bytes, wanted $1"; fail=1; }
}

# bdi_dir: sysfs directory of the bdi of $MNT.
bdi_dir() {
  dev=$(awk -v m="$MNT" '$5 == m { print $3 }' /proc/self/mountinfo | tail -1)
  echo "/sys/class/bdi/$dev"
}

# write_stats: summary of writeback WRITEs in $PROBE_LOG against $STRIPE.
#   total; aligned (start on a stripe boundary, end at or before the next); full (exactly one
#   whole stripe); crossing (straddle a boundary); short (< stripe); short_eof (short and
#   ending at the file's end); and the percentages of aligned, full and non-crossing WRITEs.
#   aligned_xeof_pct: aligned % among the WRITEs that are not short file-end WRITEs (a file
#   whose size is not a multiple of the stripe must end with one short WRITE).
#   split_later: WRITEs that are neither whole stripes nor the file-end WRITE and start after
#   their file's first stripe (a kernel whose writers stall at a fresh bdi splits only the
#   first stripe, see align.sh's FIRST_SPLIT).
write_stats() {
  awk -v S="$STRIPE" -v FS_=" " '
    /^WRITE / && / cache=1 / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      off = v["off"] + 0; sz = v["size"] + 0; ino = v["ino"]
      n++; end = off + sz
      if (end > fend[ino]) fend[ino] = end
      o[n] = off; s[n] = sz; f[n] = ino
    }
    END {
      for (k = 1; k <= n; k++) {
        off = o[k]; sz = s[k]; end = off + sz
        cross = int(off / S) != int((end - 1) / S)
        if (cross) c++
        if (off % S == 0 && !cross) a++
        if (off % S == 0 && sz == S) full++
        if (sz < S) { sh++; if (end == fend[f[k]]) { se++; continue } }
        xn++; if (off % S == 0 && !cross) xa++
        if (off >= S && (off % S || sz != S)) sl++
      }
      printf "total=%d aligned=%d full=%d crossing=%d short=%d short_eof=%d aligned_pct=%.1f full_pct=%.1f noncrossing_pct=%.1f aligned_xeof_pct=%.1f split_later=%d\n", \
        n, a, full, c, sh, se, n ? 100.0 * a / n : 0, n ? 100.0 * full / n : 0, \
        n ? 100.0 * (n - c) / n : 0, xn ? 100.0 * xa / xn : 100, sl
    }' "$PROBE_LOG"
}
