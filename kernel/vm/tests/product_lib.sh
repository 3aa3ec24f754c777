# Shared helpers of the product tests (busybox sh): stripefs itself, not fuse_probe, serves
# $MNT from an embedded volume on the guest's tmpfs. Sourced after lib.sh. The guest needs
# /bin/stripefs (kernel/vm/run.sh --stripefs) and only the harness interface: $MODULE
# (stock|patched), /dev/fuse, /sys/module/fuse, /proc, /sys and a tmpfs /tmp.
VOL=/tmp/vol
STAT_JSON=/tmp/stat.json
STAT_FLAT=/tmp/stat.flat
SF_OUT=/tmp/stripefs-mount.out
command -v stripefs > /dev/null ||
  { echo "FAIL: no stripefs binary in the guest (kernel/vm/run.sh --stripefs BIN)"; exit 1; }

# json_flat: turns `stripefs stat --json` (nlohmann dump(2): one member per line) into
# "path=value" lines, e.g. negotiated.alignment_acknowledged=true, queues.1.background=42.
json_flat() {
  awk '{
      line = $0; sub(/^[ \t]+/, "", line); sub(/,$/, "", line)
      key = ""; val = line
      if (line ~ /^"[^"]*": /) {
        key = line; sub(/": .*/, "", key); sub(/^"/, "", key)
        val = line; sub(/^"[^"]*": /, "", val)
      } else if (depth > 0 && isarr[depth]) {
        key = idx[depth]++
      }
      if (val == "{" || val == "[") { depth++; path[depth] = key; isarr[depth] = (val == "["); idx[depth] = 0; next }
      if (val == "}" || val == "]") { depth--; next }
      p = ""
      for (i = 2; i <= depth; i++) p = p path[i] "."
      gsub(/^"|"$/, "", val)
      print p key "=" val
    }'
}

# sf_stat: fetches the daemon's counters into $STAT_FLAT; a failed `stripefs stat` fails the
# test (stats are what every product test checks).
sf_stat() {
  if ! stripefs stat --json "$MNT" > "$STAT_JSON"; then
    echo "FAIL: stripefs stat --json $MNT failed"
    fail=1
    : > "$STAT_FLAT"
    return 1
  fi
  json_flat < "$STAT_JSON" > "$STAT_FLAT"
  grep -q '^writes.requests=' "$STAT_FLAT" ||
    { echo "FAIL: stripefs stat --json has no writes.requests"; cat "$STAT_JSON"; fail=1; }
}

# jget PATH: a value of the last sf_stat ("" if absent).
jget() { sed -n "s/^$1=//p" "$STAT_FLAT" | head -1; }

# sf_mount [stripefs mount options...]: a fresh embedded volume in $VOL served at $MNT by
# `stripefs mount -f` in the background ($SF_PID), so its exit status is checked at
# sf_umount. Returns once the daemon answers `stripefs stat`.
sf_mount() {
  rm -rf "$VOL"
  stripefs mount -f "$VOL" "$MNT" "$@" > "$SF_OUT" 2>&1 &
  SF_PID=$!
  i=0
  while ! stripefs stat "$MNT" > /dev/null 2>&1; do
    i=$((i + 1))
    if ! kill -0 "$SF_PID" 2>/dev/null || [ $i -ge 300 ]; then
      echo "FAIL: stripefs mount $VOL $MNT $* did not come up"
      cat "$SF_OUT"
      kill -9 "$SF_PID" 2>/dev/null
      umount -l "$MNT" 2>/dev/null
      exit 1
    fi
    sleep 0.1
  done
}

# sf_umount: `stripefs umount` must succeed and the daemon exit 0 by itself, leaving no
# stripefs process; its output is shown when it did not.
sf_umount() {
  must stripefs umount "$MNT" > /dev/null || umount -l "$MNT"
  i=0
  while kill -0 "$SF_PID" 2>/dev/null; do
    i=$((i + 1))
    if [ $i -ge 300 ]; then
      echo "FAIL: the stripefs daemon still runs 30 s after the unmount"
      fail=1
      kill -9 "$SF_PID" 2>/dev/null
      break
    fi
    sleep 0.1
  done
  wait "$SF_PID"
  rc=$?
  [ $rc = 0 ] || { echo "FAIL: stripefs mount -f exited with status $rc"; cat "$SF_OUT"; fail=1; }
  if grep -q 'session ended' "$SF_OUT"; then
    echo "FAIL: the daemon reports an error:"; cat "$SF_OUT"; fail=1
  fi
  rm -rf "$VOL"
}

# expect_sf_ack: stripefs asked for alignment to its stripe size, and the kernel
# acknowledged it on the patched module and not on stock.
expect_sf_ack() {
  req=$(jget negotiated.alignment_requested)
  ack=$(jget negotiated.alignment_acknowledged)
  [ "$req" = true ] || { echo "FAIL: stripefs did not request alignment (alignment_requested=$req)"; fail=1; }
  want=false
  [ "$MODULE" = patched ] && want=true
  [ "$ack" = "$want" ] || { echo "FAIL: alignment_acknowledged=$ack on the $MODULE module, wanted $want"; fail=1; }
}

# pct A B: 100 * A / B with one decimal (100.0 when B is 0).
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b > 0 ? 100.0 * a / b : 100) }'; }

# ge X MIN: X >= MIN (decimals allowed).
ge() { awk -v x="$1" -v m="$2" 'BEGIN { exit !(x >= m) }'; }
