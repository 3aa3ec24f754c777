#!/bin/busybox sh
# /init of the stripefs kernel test guest (assembled by kernel/vm/run.sh).
# Mounts the basics, loads the chosen fuse.ko, runs /tests/$TEST.sh and reports
# "STRIPEFS_RESULT rc=N" on the serial console, then powers off. rc 90: insmod failed;
# 91: the test passed but the kernel logged a warning, oops or sanitizer report.
/bin/busybox --install -s /bin
export PATH=/bin:/tools
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mkdir -p /mnt
set -a
. /config
set +a
echo "STRIPEFS_GUEST kernel=$(uname -r) cpus=$(grep -c ^processor /proc/cpuinfo) module=$MODULE test=$TEST"
rc=0
if ! insmod /lib/fuse.ko $MODPARAMS; then
  echo "STRIPEFS_ERROR insmod fuse.ko failed"
  rc=90
elif [ ! -c /dev/fuse ]; then
  mknod /dev/fuse c 10 229
fi
if [ $rc = 0 ]; then
  cd /tests && sh "/tests/$TEST.sh" $ARGS
  rc=$?
fi
dmesg | grep -E 'fuse|BUG:|WARNING:|Oops|Call Trace' | grep -v -e 'fuse: init' -e 'taints kernel' | sed 's/^/DMESG /' | tail -20
# Any kernel warning, oops or sanitizer report fails the test, whatever the script said.
bad=$(dmesg | grep -c -E 'BUG:|WARNING:|Oops|Call Trace|general protection|UBSAN|KASAN|hung_task|INFO: task')
if [ "$bad" != 0 ]; then
  echo "STRIPEFS_ERROR $bad kernel warning/oops lines in dmesg (see the DMESG lines above)"
  [ $rc = 0 ] && rc=91
fi
echo "STRIPEFS_RESULT test=$TEST module=$MODULE rc=$rc"
sync
# QEMU runs with -no-reboot, so a reset ends it (works with and without ACPI).
reboot -f
sleep 5
poweroff -f
