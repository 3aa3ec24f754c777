# Negotiation through the product: `stripefs mount` (daemon mode, as a user runs it) of an
# embedded volume on the guest's tmpfs asks for alignment to its 1 MiB stripe; `stripefs
# stat --json` must show it acknowledged on the patched module and not on stock. A 3 MiB
# file written through the mount must reach the daemon (WRITE count and bytes) and read back
# intact after the page cache is dropped. `--no-align` must not ask on either module.
. ./lib.sh
. ./product_lib.sh
rm -rf "$VOL"
must stripefs mount "$VOL" "$MNT" > "$SF_OUT" 2>&1 || { cat "$SF_OUT"; finish; }
sf_stat
must stripefs stat "$MNT" | grep -i -e alignment -e transport
expect_sf_ack
echo "RESULT product_negotiation module=$MODULE requested=$(jget negotiated.alignment_requested)" \
  "acknowledged=$(jget negotiated.alignment_acknowledged) alignment_bytes=$(jget negotiated.alignment_bytes)" \
  "stripe_size=$(jget volume.stripe_size) max_write=$(jget negotiated.max_write) transport=$(jget negotiated.transport)"
[ "$(jget negotiated.alignment_bytes)" = "$(jget volume.stripe_size)" ] ||
  { echo "FAIL: alignment_bytes $(jget negotiated.alignment_bytes) is not the stripe size $(jget volume.stripe_size)"; fail=1; }
must dd if=/dev/urandom of=/tmp/src bs=1M count=3 2>/dev/null
must cp /tmp/src "$MNT/a"
must sync
sf_stat
reqs=$(jget writes.requests) bytes=$(jget writes.bytes)
echo "RESULT product_negotiation module=$MODULE writes=$reqs write_bytes=$bytes"
[ "$reqs" -ge 3 ] && [ "$bytes" -ge 3145728 ] ||
  { echo "FAIL: $reqs WRITEs with $bytes bytes for a 3 MiB file, wanted >= 3 and >= 3145728"; fail=1; }
echo 3 > /proc/sys/vm/drop_caches
[ "$(md5sum < "$MNT/a")" = "$(md5sum < /tmp/src)" ] || { echo "FAIL: $MNT/a reads back different data"; fail=1; }
must stripefs umount "$MNT" > /dev/null
pidof stripefs > /dev/null && { echo "FAIL: a stripefs daemon still runs after stripefs umount"; fail=1; }

sf_mount --no-align
sf_stat
echo "RESULT product_negotiation module=$MODULE no_align requested=$(jget negotiated.alignment_requested) acknowledged=$(jget negotiated.alignment_acknowledged)"
[ "$(jget negotiated.alignment_requested)" = false ] && [ "$(jget negotiated.alignment_acknowledged)" = false ] ||
  { echo "FAIL: --no-align still requested or got alignment"; fail=1; }
sf_umount
finish
