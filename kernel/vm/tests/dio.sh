# Direct-IO invalidation (generic/451 scenario): async direct writes (io_uring) racing a
# buffered reader must not leave stale page-cache pages, for O_DIRECT and FOPEN_DIRECT_IO.
# Also fails unless each mode really wrote directly: every round's bytes reach the server as
# direct WRITEs (cache=0), and the FOPEN_DIRECT_IO file gets no writeback WRITE at all.
. ./lib.sh
rounds=${1:-20}
size=4194304  # dio_check's default file size, written in 128 KiB chunks per round
start_probe
must dio_check $MNT/plain --rounds "$rounds"
must dio_check $MNT/dio_file --rounds "$rounds" --no-odirect
plain_ino=$(stat -c %i $MNT/plain)
dio_ino=$(stat -c %i $MNT/dio_file)
stop_probe
for f in plain:$plain_ino dio_file:$dio_ino; do
  name=${f%%:*} ino=${f#*:}
  direct=$(grep -c "^WRITE ino=$ino .* cache=0 " $PROBE_LOG)
  cached=$(grep -c "^WRITE ino=$ino .* cache=1 " $PROBE_LOG)
  echo "RESULT dio module=$MODULE file=$name direct_writes=$direct writeback_writes=$cached"
  [ "$direct" -ge $((rounds * size / 131072)) ] ||
    { echo "FAIL: $name: $direct direct WRITEs, wanted >= $((rounds * size / 131072))"; fail=1; }
done
expect_writes $size "/ ino=$dio_ino / && / cache=0 /"
[ "$(grep -c "^WRITE ino=$dio_ino .* cache=1 " $PROBE_LOG)" = 0 ] ||
  { echo "FAIL: FOPEN_DIRECT_IO not in effect: writeback WRITEs on dio_file"; fail=1; }
echo "RESULT dio module=$MODULE rounds=$rounds failed=$fail"
finish
