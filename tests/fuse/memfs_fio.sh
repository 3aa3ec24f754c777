#!/bin/bash
# Engine-only transport comparison: mounts the in-memory MemFs through our
# engine (memfs_mount) and runs fio against it. Root; io-uring needs the
# fuse module's enable_uring (memfs_mount sets and restores it).
#   tests/fuse/memfs_fio.sh dev|uring [BUILD_DIR]   -> one CSV line per job
set -u
T=$1
B=${2:-/work/main/build-fuse}
MNT=$(mktemp -d /tmp/memfs-fio.XXXXXX)
$B/tests/fuse/memfs_mount $MNT $T 2 8 > /tmp/memfs_$T.log 2>&1 &
PID=$!
for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
sleep 0.5
# pre-write the file
dd if=/dev/urandom of=$MNT/f bs=1M count=256 status=none conv=fsync
run() { # name args...
  name=$1; shift
  out=$(fio --name=$name --filename=$MNT/f --size=256M --runtime=5 --time_based --group_reporting --output-format=terse --terse-version=3 "$@" 2>/dev/null)
  # terse v3: field 8 = read iops(?) use json instead
  echo "$out" | awk -F';' -v n=$name -v t=$T '{printf "%s,%s,read_iops=%s,read_bw_KiB=%s,write_iops=%s,write_bw_KiB=%s\n", t, n, $8, $7, $49, $48}'
}
sync; echo 3 > /proc/sys/vm/drop_caches
run rr4k_qd1_j1 --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=1 --numjobs=1
run rr4k_qd4_j1 --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=4 --numjobs=1
run rr4k_qd8_j1 --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=8 --numjobs=1
run rr4k_qd8_j2 --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth=8 --numjobs=2
run seqread1m --rw=read --bs=1M --direct=1 --ioengine=libaio --iodepth=4
run seqwrite1m --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=4
kill -TERM $PID; wait $PID
rmdir $MNT
grep -E "transport|queue" /tmp/memfs_$T.log | tail -6
