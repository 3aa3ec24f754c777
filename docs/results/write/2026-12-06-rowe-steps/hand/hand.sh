#!/bin/bash
# Row e by hand: 6-server 4+2 cluster, fio 4K randwrite fsync=64 for $3 s; per-process CPU,
# chunk engine counters (metrics) before/after.
set -u
B=$1; OUT=$2; T=${3:-8}; mkdir -p $OUT
W=/var/tmp/s15/e/w; rm -rf $W; mkdir -p $W/mnt
$B cluster up --servers 6 --dir $W/cl --k 4 --m 2 --cell-size 262144 >/dev/null || exit 1
trap "$B umount $W/mnt >/dev/null 2>&1; $B cluster down --dir $W/cl >/dev/null 2>&1" EXIT
$B mount --meta $(cat $W/cl/metad.addr) --key $W/cl/cluster.key $W/mnt >/dev/null || exit 1
sleep 1
PID=$(pgrep -f "stripefs mount.*$W/mnt" | head -1)
CPIDS=$(cat $W/cl/chunkd.*.pid); MPID=$(cat $W/cl/metad.pid)
fio --name=p --filename=$W/mnt/f --rw=write --bs=1M --size=16M --end_fsync=1 >/dev/null 2>&1
scrape() { for a in $(cat $W/cl/chunkd.*.metrics); do curl -s http://$a/metrics; done | grep '^stripefs_chunk_engine' | awk '{split($1,n,"{"); s[n[1]]+=$2} END{for(k in s) print k, s[k]}' | sort; }
cpu() { for p in $PID $MPID $CPIDS; do awk '{print $14+$15}' /proc/$p/stat; done | paste -sd' '; }
scrape > $OUT/m0; c0=$(cpu)
fio --name=r --filename=$W/mnt/f --rw=randwrite --bs=4K --size=16M --fsync=64 --runtime=$T --time_based --output-format=json > $OUT/fio.json 2>/dev/null
scrape > $OUT/m1; c1=$(cpu)
ios=$(python3 -c "import json;print(json.load(open('$OUT/fio.json'))['jobs'][0]['write']['total_ios'])")
fs=$((ios/64))
python3 - "$c0" "$c1" $fs $ios $T $OUT <<'PY'
import sys
c0=list(map(int,sys.argv[1].split())); c1=list(map(int,sys.argv[2].split())); fs=int(sys.argv[3]); ios=int(sys.argv[4]); T=int(sys.argv[5]); out=sys.argv[6]
d=[(b-a)*10 for a,b in zip(c0,c1)]  # ms
print(f"iops={ios//T} fsyncs={fs} per fsync ms CPU: daemon={d[0]/fs:.2f} metad={d[1]/fs:.2f} chunkds={sum(d[2:])/fs:.2f}")
m0=dict(l.split() for l in open(out+'/m0')); m1=dict(l.split() for l in open(out+'/m1'))
dd={k:float(m1[k])-float(m0.get(k,0)) for k in m1}
P='stripefs_chunk_engine_'
def g(k): return dd.get(P+k,0)
for k in sorted(dd): print(f"  {k[len(P):]} {dd[k]:.4g}")
ops=g('committed_ops_total'); b=g('commit_batches_total')
if ops and b:
  print(f"per op ms: queue={1e3*g('queue_seconds_total')/ops:.2f} commit_wait={1e3*g('commit_wait_seconds_total')/ops:.2f}; per batch ms={1e3*g('batch_seconds_total')/b:.2f}; data_sync ms={1e3*g('data_sync_seconds_total')/max(1,g('data_syncs_total')):.2f} index_sync ms={1e3*g('index_sync_seconds_total')/max(1,g('index_syncs_total')):.2f}; data_write ms={1e3*g('data_write_seconds_total')/max(1,g('data_writes_total')):.3f}; batches/fsync/server={b/fs/6:.2f} ops/batch={ops/b:.1f}")
PY
