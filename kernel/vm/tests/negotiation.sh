# Negotiation: the patched fuse.ko offers FUSE_ALIGN_PG_ORDER in INIT and honours a 1 MiB
# alignment request; the stock one does not offer it. An alignment the request size cannot
# hold (max_pages 128 = 512 KiB < 1 MiB) is ignored with one kernel warning.
. ./lib.sh
fail=0
start_probe --align-order 20
echo x > $MNT/a
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

# Too large for the request size: must be ignored, with a warning, and I/O still works.
dmesg -c >/dev/null
start_probe --align-order 20 --max-pages 128
dd if=/dev/zero of=$MNT/b bs=1M count=4 2>/dev/null
sync
stop_probe
if [ "$MODULE" = patched ]; then
  if dmesg | grep -q 'ignoring align_page_order 20'; then
    echo "RESULT negotiation oversize_warning=1"
  else
    echo "FAIL: no warning for an alignment larger than max_pages"; fail=1
  fi
fi
STRIPE=524288 write_stats
[ "$(grep -c '^WRITE' $PROBE_LOG)" -ge 8 ] || { echo "FAIL: writes missing with oversize alignment"; fail=1; }

# A page order (DDN pitfall: 8 means 256 bytes, below a page) leaves alignment off silently.
start_probe --align-order 8
echo y > $MNT/c
stop_probe
grep -q 'EXIT code=0' $PROBE_LOG || { echo "FAIL: probe did not exit cleanly"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
