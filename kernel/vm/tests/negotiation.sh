# Negotiation: the patched fuse.ko offers FUSE_ALIGN_PG_ORDER in INIT and honours a 1 MiB
# alignment request; the stock one does not offer it. An alignment the request size cannot
# hold (max_pages 128 = 512 KiB < 1 MiB) is ignored with one kernel warning (patched) or
# not mentioned at all (stock); either way all the bytes written reach the server.
. ./lib.sh
start_probe --align-order 20
must sh -c "echo x > $MNT/a"
stop_probe
grep '^INIT' $PROBE_LOG
offered=$(sed -n 's/^INIT .*align_offered=\([01]\).*/\1/p' $PROBE_LOG)
ack=$(sed -n 's/^INIT_REPLY .*align_acknowledged=\([01]\).*/\1/p' $PROBE_LOG)
echo "RESULT negotiation module=$MODULE align_offered=$offered align_acknowledged=$ack"
if [ "$MODULE" = patched ]; then
  [ "$offered" = 1 ] && [ "$ack" = 1 ] || { echo "FAIL: patched module did not offer FUSE_ALIGN_PG_ORDER"; fail=1; }
else
  [ "$offered" = 0 ] && [ "$ack" = 0 ] || { echo "FAIL: stock module offered FUSE_ALIGN_PG_ORDER"; fail=1; }
fi
if [ "$MODULE" = patched ]; then expect_ack 1; else expect_ack 0; fi
expect_writes 2

# Too large for the request size: must be ignored, with a warning, and I/O still works.
# (dmesg is not cleared: init.sh checks the whole boot for kernel warnings.)
start_probe --align-order 20 --max-pages 128
must dd if=/dev/zero of=$MNT/b bs=1M count=4 2>/dev/null
must sync
stop_probe
warned=0
dmesg | grep -q 'ignoring align_page_order 20' && warned=1
echo "RESULT negotiation oversize_warning=$warned"
if [ "$MODULE" = patched ]; then
  [ $warned = 1 ] || { echo "FAIL: no warning for an alignment larger than max_pages"; fail=1; }
else
  [ $warned = 0 ] || { echo "FAIL: the stock module warned about alignment"; fail=1; }
fi
STRIPE=524288 write_stats
expect_writes 4194304

# A page order (DDN pitfall: 8 means 256 bytes, below a page) leaves alignment off silently:
# no warning, and writeback is not cut at 1 MiB (2^8 pages, the page-order reading): 4 MiB
# written from 512 KiB go out in WRITEs that cross 1 MiB boundaries, as on a stock module.
start_probe --align-order 8
must dd if=/dev/zero of=$MNT/c bs=512K seek=1 count=8 2>/dev/null
must sync
stop_probe
expect_writes 4194304
if dmesg | grep -q 'ignoring align_page_order 8'; then
  echo "FAIL: align_page_order 8 was not ignored silently"; fail=1
fi
stats=$(STRIPE=1048576 write_stats)
echo "RESULT negotiation order8 $stats"
crossing=$(echo "$stats" | sed -n 's/.* crossing=\([0-9]*\).*/\1/p')
[ "${crossing:-0}" -gt 0 ] ||
  { echo "FAIL: align_page_order 8 cut every WRITE at 1 MiB (alignment in effect)"; fail=1; }
finish
