# Direct-IO invalidation (generic/451 scenario): async direct writes (io_uring) racing a
# buffered reader must not leave stale page-cache pages, for O_DIRECT and FOPEN_DIRECT_IO.
. ./lib.sh
rounds=${1:-20}
fail=0
start_probe
dio_check $MNT/plain --rounds "$rounds" || fail=1
dio_check $MNT/dio_file --rounds "$rounds" --no-odirect || fail=1
stop_probe
echo "RESULT dio module=$MODULE rounds=$rounds failed=$fail"
[ $fail = 0 ] && echo PASS
exit $fail
