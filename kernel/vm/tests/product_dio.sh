# Direct-IO invalidation through the product (xfstests generic/451 scenario): async
# O_DIRECT writes (io_uring, several in flight) racing a buffered reader on a stripefs mount
# must never leave stale page-cache pages (dio_check). Also fails unless every round's bytes
# reached the daemon as direct WRITEs (not writeback) and the file reads back with the last
# round's pattern after the page cache is dropped.
# Args: [ROUNDS (default 20)] [stripefs mount options...]
. ./lib.sh
. ./product_lib.sh
rounds=${1:-20}
[ $# -gt 0 ] && shift
size=4194304  # dio_check's default file size, written in 128 KiB chunks per round
sf_mount "$@"
must dio_check $MNT/plain --rounds "$rounds"
sf_stat
reqs=$(jget writes.requests) wb=$(jget writes.writeback)
direct=$((reqs - wb))
echo "RESULT product_dio module=$MODULE rounds=$rounds writes=$reqs writeback_writes=$wb direct_writes=$direct transport=$(jget negotiated.transport)"
[ "$direct" -ge $((rounds * size / 131072)) ] ||
  { echo "FAIL: $direct direct WRITEs, wanted >= $((rounds * size / 131072))"; fail=1; }
echo 3 > /proc/sys/vm/drop_caches
want=$(dd if=/dev/zero bs=1M count=4 2>/dev/null | tr '\000' "$(printf "\\$(printf %o "$rounds")")" | md5sum)
[ "$(md5sum < $MNT/plain)" = "$want" ] || { echo "FAIL: $MNT/plain does not read back as the last round's pattern"; fail=1; }
sf_umount
finish
