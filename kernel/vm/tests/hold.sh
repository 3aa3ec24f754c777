# Held-back stripes are not starved (patch 5): background writeback holds back the partial
# stripe at the end of a growing file, so a writer that stops in the middle of a stripe and
# keeps its file open (no close, fsync or sync) must still get every byte written back by
# the kernel's own writeback. bdi max_ratio 1, so background writeback runs while the file
# grows; dirty_expire lowered to 1 s so periodic writeback comes soon. Passes when Dirty +
# Writeback in /proc/meminfo drop to 0 while the writer still holds the file open.
# Args: [KIB written (default 5632 = 5.5 MiB)] [WAIT seconds (default 60)]
. ./lib.sh
kib=${1:-5632}
wait_s=${2:-60}
old_expire=$(cat /proc/sys/vm/dirty_expire_centisecs)
old_wb=$(cat /proc/sys/vm/dirty_writeback_centisecs)
set_knob /proc/sys/vm/dirty_expire_centisecs 100
set_knob /proc/sys/vm/dirty_writeback_centisecs 50
start_probe --align-order 20 --no-data
set_knob "$(bdi_dir)/max_ratio" 1
write_hold $MNT/f "$kib" $((wait_s + 60)) > /tmp/write_hold.out &
wpid=$!
i=0
while ! grep -q written /tmp/write_hold.out 2>/dev/null; do
  i=$((i + 1))
  [ $i -lt 1200 ] || { echo "FAIL: write_hold did not finish writing"; fail=1; break; }
  sleep 0.1
done
t0=$(date +%s)
left=-1
i=0
while [ $i -lt $((wait_s * 10)) ]; do
  left=$(awk '/^(Dirty|Writeback):/ { s += $2 } END { print s + 0 }' /proc/meminfo)
  [ "$left" = 0 ] && break
  sleep 0.1
  i=$((i + 1))
done
t1=$(date +%s)
still_open=0
kill -0 $wpid 2>/dev/null && still_open=1
kill $wpid 2>/dev/null
wait $wpid 2>/dev/null
stop_probe
set_knob /proc/sys/vm/dirty_expire_centisecs "$old_expire"
set_knob /proc/sys/vm/dirty_writeback_centisecs "$old_wb"
written=$(awk '/^WRITE / && / cache=1 / { split($3, kv, "="); o = kv[2]; split($4, kv, "=");
  e = o + kv[2]; if (e > m) m = e } END { print m + 0 }' $PROBE_LOG)
echo "RESULT hold module=$MODULE kib=$kib dirty_left_kib=$left writer_still_open=$still_open" \
  "written_bytes=$written tcg_seconds_to_clean=$((t1 - t0)) $(write_stats)"
if [ "$left" != 0 ] || [ $still_open != 1 ]; then
  echo "FAIL: $left KiB still dirty after $wait_s s with the file open (writer open=$still_open)"
  fail=1
fi
if [ "$written" != $((kib * 1024)) ]; then
  echo "FAIL: the server received WRITEs up to $written, not $((kib * 1024))"
  fail=1
fi
expect_writes $((kib * 1024))
if [ "$MODULE" = patched ]; then expect_ack 1; else expect_ack 0; fi
finish
