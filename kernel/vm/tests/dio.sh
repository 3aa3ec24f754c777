# Direct-IO invalidation (generic/451 scenario): async direct writes (io_uring) racing a
# buffered reader must not leave stale page-cache pages, for O_DIRECT and FOPEN_DIRECT_IO.
# Also fails unless each mode really wrote directly: every round's bytes reach the server as
# direct WRITEs (cache=0), and the FOPEN_DIRECT_IO file gets no writeback WRITE at all.
. ./lib.sh
rounds=${1:-20}
# STOCK_LACKS_FIX=1 (kernel lines whose stock kernel lacks "fuse: invalidate the page cache
# after direct write", e.g. Debian 12's 6.1): on the stock module the FOPEN_DIRECT_IO file
# must read stale data (the bug the line's backport fixes is there and the test sees it);
# the O_DIRECT race is recorded only (it hits some rounds, not all).
# STOCK_LACKS_FIX=2 (Debian 13's 6.12: fuse_direct_io() already invalidates after a
# FOPEN_DIRECT_IO write, 0 stale of 20 rounds, and lacks only the async O_DIRECT
# invalidation, whose race hits some rounds, not all): on the stock module both recorded.
stock_lacks_fix=${2:-0}
size=4194304  # dio_check's default file size, written in 128 KiB chunks per round
start_probe
if [ "$MODULE" = stock ] && [ "$stock_lacks_fix" != 0 ]; then
  dio_check $MNT/plain --rounds "$rounds" > /tmp/dio_plain.out 2>&1
  dio_check $MNT/dio_file --rounds "$rounds" --no-odirect > /tmp/dio_file.out 2>&1
  tail -3 /tmp/dio_plain.out /tmp/dio_file.out
  pm=$(sed -n 's/^DIO_CHECK .*mismatches=\([0-9]*\).*/\1/p' /tmp/dio_plain.out)
  fm=$(sed -n 's/^DIO_CHECK .*mismatches=\([0-9]*\).*/\1/p' /tmp/dio_file.out)
  echo "RESULT dio module=stock baseline odirect_stale_rounds=${pm:-?} fopen_direct_io_stale_rounds=${fm:-?}"
  [ -n "$pm" ] || { echo "FAIL: dio_check (O_DIRECT) did not finish its rounds"; fail=1; }
  [ -n "$fm" ] || { echo "FAIL: dio_check (FOPEN_DIRECT_IO) did not finish its rounds"; fail=1; }
  [ "$stock_lacks_fix" != 1 ] || [ -z "$fm" ] || [ "$fm" -gt 0 ] ||
    { echo "FAIL: no stale read after FOPEN_DIRECT_IO writes on the stock module ($fm): does this kernel carry the fix now? Then drop the DIO backport from the line"; fail=1; }
else
  must dio_check $MNT/plain --rounds "$rounds"
  must dio_check $MNT/dio_file --rounds "$rounds" --no-odirect
fi
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
