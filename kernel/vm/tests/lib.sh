# Shared helpers for guest test scripts (busybox sh). Sourced, not run.
MNT=/mnt
PROBE_LOG=/tmp/probe.log
STRIPE=${STRIPE:-1048576}

# start_probe [fuse_probe options...]: mounts the probe server at $MNT.
start_probe() {
  fuse_probe "$MNT" --log "$PROBE_LOG" "$@" &
  PROBE_PID=$!
  i=0
  while ! grep -q " $MNT fuse" /proc/mounts; do
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "FAIL: probe did not mount"; return 1; }
    sleep 0.1
  done
  # The mount is visible before INIT is answered; wait for the reply to be logged.
  i=0
  while ! grep -q INIT_REPLY "$PROBE_LOG" 2>/dev/null; do
    stat "$MNT" >/dev/null 2>&1 || true
    i=$((i + 1))
    [ $i -lt 100 ] || { echo "FAIL: no INIT reply"; return 1; }
    sleep 0.1
  done
}

# stop_probe: unmounts and waits for the server to write its summary.
stop_probe() {
  umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
  i=0
  while kill -0 "$PROBE_PID" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 100 ] || { kill -9 "$PROBE_PID" 2>/dev/null; break; }
    sleep 0.1
  done
  wait "$PROBE_PID" 2>/dev/null || true
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
      }
      printf "total=%d aligned=%d full=%d crossing=%d short=%d short_eof=%d aligned_pct=%.1f full_pct=%.1f noncrossing_pct=%.1f aligned_xeof_pct=%.1f\n", \
        n, a, full, c, sh, se, n ? 100.0 * a / n : 0, n ? 100.0 * full / n : 0, \
        n ? 100.0 * (n - c) / n : 0, xn ? 100.0 * xa / xn : 100
    }' "$PROBE_LOG"
}
