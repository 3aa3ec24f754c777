#!/bin/bash
# Side-by-side A/B of the cluster write path: two stripefs binaries (e.g. the
# previous build and this one), each on a fresh local cluster of SERVERS
# chunkd (4+2, 1 MiB stripes), mounted and written with fio: 1 MiB
# sequential buffered writes of SIZE with end_fsync. Runs alternate A, B, A,
# B... REPS times; prints MiB/s per run, the medians and ratio=B/A, and the
# load average. Everything is torn down on exit.
#   bench/cluster/pipeline_ab.sh OLD_BIN NEW_BIN [SIZE=256M] [REPS=2] [SERVERS=6]
set -euo pipefail
A=$1 B=$2 SIZE=${3:-256M} REPS=${4:-2} SERVERS=${5:-6}
command -v fio >/dev/null || { echo "fio is needed (apt-get install fio)"; exit 2; }
WORK=$(mktemp -d /tmp/stripefs-ab.XXXXXX)
cur_bin="" cur_dir="" cur_mnt=""
cleanup() {
  if [ -n "$cur_mnt" ]; then "$cur_bin" umount --lazy "$cur_mnt" >/dev/null 2>&1 || true; fi
  if [ -n "$cur_dir" ]; then "$cur_bin" cluster down --grace 3 --dir "$cur_dir" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
run() {  # BIN TAG -> MiB/s
  local bin=$1 tag=$2
  cur_bin=$bin cur_dir=$WORK/$tag-cluster cur_mnt=$WORK/$tag-mnt
  mkdir -p "$cur_mnt"
  "$bin" cluster up --servers "$SERVERS" --dir "$cur_dir" >>"$WORK/log" 2>&1
  "$bin" mount --meta "$(cat "$cur_dir/metad.addr")" --key "$cur_dir/cluster.key" \
    "$cur_mnt" >>"$WORK/log" 2>&1
  fio --name=seq --directory="$cur_mnt" --rw=write --bs=1M --size="$SIZE" \
    --end_fsync=1 --output-format=json --output="$WORK/$tag.json" >>"$WORK/log" 2>&1
  "$bin" umount "$cur_mnt" >>"$WORK/log" 2>&1; cur_mnt=""
  "$bin" cluster down --grace 3 --dir "$cur_dir" >>"$WORK/log" 2>&1; cur_dir=""
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]["write"]; print("%.1f" % (j["bw_bytes"]/1048576))' "$WORK/$tag.json"
}
as=() bs=()
for r in $(seq 1 "$REPS"); do
  a=$(run "$A" "a$r"); echo "run $r A: $a MiB/s  (load $(cut -d' ' -f1-3 /proc/loadavg))"
  b=$(run "$B" "b$r"); echo "run $r B: $b MiB/s  (load $(cut -d' ' -f1-3 /proc/loadavg))"
  as+=("$a") bs+=("$b")
done
python3 - "${as[*]}" "${bs[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"seqwrite-1M-end_fsync A={ma:.1f}MiB/s B={mb:.1f}MiB/s ratio={mb/ma:.2f}")
PY
echo "loadavg: $(cat /proc/loadavg)"
