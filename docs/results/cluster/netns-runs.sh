#!/bin/sh
# Quick matrix, but 128 MiB files (> the mount's 64 MiB read cache), 3 s jobs.
cd /work/wt/netns
B=build/tools/stripefs
O=/tmp/netns-bench/r2
for r in 1gbit 10gbit loopback; do
  echo "=== $r $(date -u) $(cat /proc/loadavg)"
  if [ $r = loopback ]; then
    $B bench cluster --quick --size 128 --runtime 3 --uring off --no-passthrough --out $O/loopback-quick
  else
    $B bench cluster --quick --size 128 --runtime 3 --uring off --no-passthrough --netns --link-rate $r --out $O/netns-$r
  fi
  echo "rc=$?"
done
echo "=== done $(date -u) $(cat /proc/loadavg)"
