# stripefs with fewer io-uring queues than CPUs (`--uring-queues N`, patch 7), and with one
# queue per CPU (as before patch 7). Meant for 8 vCPUs. Per phase, for each CPU C in turn:
#   - C looks up LOOKUPS new names (sync LOOKUPs, one process pinned to C), and the
#     daemon's per-queue request counters (stat --json queues[].requests) show which queue
#     served them: one queue must have taken all of them (>= LOOKUPS new requests, every
#     other queue fewer), and the daemon must have counted the LOOKUPs;
#   - C writes MIB MiB (dd conv=fsync) and reads them back (page cache dropped), both
#     pinned to C, with the checksum written.
# Phases (comma list; default reduced,full):
#   reduced: `--uring-queues N`. Patched (patch 7 offers FUSE_URING_REDUCED_Q in INIT): the
#            daemon reports N queues, each of them served requests, and each one served the
#            LOOKUPs of >= CPUS/N - 1 CPUs (the spread). Stock (no offer): the daemon must
#            ignore N, register one queue per CPU (CPU C's LOOKUPs on queue C) and log
#            "--uring-queues N ignored: ..."; a daemon that registers N queues anyway hangs.
#   full:    no --uring-queues (one queue per CPU): CPU C's LOOKUPs on queue C, as before.
# Both phases check negotiated.uring_reduced_offered: true on patched, false on stock.
# Every blocking step runs under `timeout`: a kernel without patch 7 never makes a ring
# with fewer queues than CPUs ready, so requests wait forever; the test then FAILs with
# what hung instead of hanging CI (the mount is lazily unmounted, the daemon killed).
# Args: [PHASES] [N (default 2)] [LOOKUPS (default 20)] [MIB (default 1)]
. ./lib.sh
. ./product_lib.sh
phases=${1:-reduced,full}
nq=${2:-2}
lookups=${3:-20}
mib=${4:-1}
T=60  # seconds any one step may take under TCG before it counts as hung
ncpu=$(grep -c ^processor /proc/cpuinfo)
[ "$ncpu" -ge 4 ] || { echo "FAIL: needs >= 4 guest CPUs, got $ncpu"; exit 1; }
[ "$nq" -lt "$ncpu" ] || { echo "FAIL: N=$nq must be below the $ncpu CPUs"; exit 1; }
echo "CONFIG product_uring_reduced module=$MODULE cpus=$ncpu queues=$nq lookups=$lookups mib=$mib"

# qget N FIELD: FIELD of uring queue N in the last sf_stat ("" if the daemon has no such queue).
qget() {
  i=0
  while [ -n "$(jget queues.$i.transport)" ]; do
    if [ "$(jget queues.$i.transport)" = uring ] && [ "$(jget queues.$i.queue)" = "$1" ]; then
      jget queues.$i.$2
      return
    fi
    i=$((i + 1))
  done
}
# bounded_stat: sf_stat under a timeout (stat resolves the mount point, which may need a
# GETATTR); 1 if it hung.
bounded_stat() {
  if ! timeout $T stripefs stat --json "$MNT" > "$STAT_JSON"; then
    echo "FAIL: stripefs stat --json $MNT failed or hung (> $T s)"
    fail=1
    return 1
  fi
  json_flat < "$STAT_JSON" > "$STAT_FLAT"
}
# give_up WHAT: a step hung: record it, tear the mount down without waiting on it, end.
give_up() {
  echo "FAIL: $1"
  echo "RESULT product_uring_reduced phase=$phase module=$MODULE outcome=hung step=\"$1\""
  echo "the daemon's log:"; cat "$SF_OUT"
  umount -l "$MNT" 2>/dev/null
  kill -9 "$SF_PID" 2>/dev/null
  wait "$SF_PID" 2>/dev/null
  rm -rf "$VOL"
  fail=1
  finish
}
# bounded_mount OPTIONS...: sf_mount whose readiness check cannot hang.
bounded_mount() {
  rm -rf "$VOL"
  stripefs mount -f "$VOL" "$MNT" "$@" > "$SF_OUT" 2>&1 &
  SF_PID=$!
  i=0
  while :; do
    timeout $T stripefs stat "$MNT" > /dev/null 2>&1
    rc=$?
    [ $rc = 0 ] && break
    [ $rc = 124 ] && give_up "stripefs stat $MNT hung (> $T s) after mount $*"
    i=$((i + 1))
    if ! kill -0 "$SF_PID" 2>/dev/null || [ $i -ge 300 ]; then
      cat "$SF_OUT"
      give_up "stripefs mount $* did not come up"
    fi
    sleep 0.1
  done
}

# data_deltas CPU: the requests each queue served since r0_Q (CPU's data phase, per the
# last bounded_stat); moves r0_Q on. The phase must have reached the daemon.
data_deltas() {
  q=0 d="" all=0
  while [ $q -lt "$want_q" ]; do
    r=$(qget $q requests)
    eval "dq=\$(( r - r0_$q ))"
    [ "$dq" -gt 0 ] && d="$d q$q=+$dq"
    all=$((all + dq))
    eval "r0_$q=$r"
    q=$((q + 1))
  done
  echo "RESULT product_uring_reduced phase=$phase module=$MODULE cpu=$1 data_deltas$d"
  [ $all -gt 0 ] || { echo "FAIL: CPU $1's write and read reached no queue"; fail=1; }
}

must dd if=/dev/urandom of=/tmp/src bs=1M count="$mib" 2>/dev/null
sum=$(md5sum < /tmp/src)
sum=${sum%% *}

for phase in $(echo $phases | tr , ' '); do
  case $phase in
    reduced) opts="--uring-queues $nq"
             if [ "$MODULE" = patched ]; then want_q=$nq; else want_q=$ncpu; fi ;;
    full) want_q=$ncpu; opts="" ;;
    *) echo "FAIL: unknown phase $phase"; fail=1; continue ;;
  esac
  # shellcheck disable=SC2086
  bounded_mount --transport=uring --enable-uring $opts
  bounded_stat || give_up "stripefs stat after the mount"
  [ "$(jget negotiated.transport)" = uring ] ||
    { echo "FAIL: transport $(jget negotiated.transport), wanted uring"; fail=1; }
  [ "$(jget negotiated.uring_queues)" = "$want_q" ] ||
    { echo "FAIL: the daemon has $(jget negotiated.uring_queues) io-uring queues, wanted $want_q"; fail=1; }
  want_offer=false; [ "$MODULE" = patched ] && want_offer=true
  [ "$(jget negotiated.uring_reduced_offered)" = $want_offer ] ||
    { echo "FAIL: negotiated.uring_reduced_offered is '$(jget negotiated.uring_reduced_offered)', wanted $want_offer on $MODULE"; fail=1; }
  ignored="--uring-queues $nq ignored: this kernel cannot serve fewer io-uring queues than CPUs"
  if [ "$phase" = reduced ] && [ "$MODULE" != patched ]; then
    if grep -qF -- "$ignored" "$SF_OUT"; then
      echo "daemon log: $(grep -F -- "$ignored" "$SF_OUT")"
    else
      echo "FAIL: the daemon's log lacks \"$ignored\""; cat "$SF_OUT"; fail=1
    fi
  elif grep -qF -- "ignored: this kernel cannot serve" "$SF_OUT"; then
    echo "FAIL: the daemon logged the fallback on $MODULE, phase $phase"; cat "$SF_OUT"; fail=1
  fi
  map="" c=0
  while [ $c -lt "$ncpu" ]; do
    if [ $c = 0 ]; then
      q=0
      while [ $q -lt "$want_q" ]; do eval "r0_$q=$(qget $q requests)"; q=$((q + 1)); done
    else
      bounded_stat || give_up "stripefs stat after CPU $((c - 1))'s data"
      data_deltas $((c - 1))
    fi
    l0=$(jget requests_by_opcode.LOOKUP); l0=${l0:-0}
    timeout $T taskset -c $c sh -c "i=0; while [ \$i -lt $lookups ]; do [ -e $MNT/nx-$phase-$c-\$i ]; i=\$((i + 1)); done" ||
      give_up "$lookups LOOKUPs from CPU $c (exit $?)"
    bounded_stat || give_up "stripefs stat after CPU $c's LOOKUPs"
    l1=$(jget requests_by_opcode.LOOKUP)
    [ $((l1 - l0)) -ge "$lookups" ] ||
      { echo "FAIL: CPU $c: the daemon counted $((l1 - l0)) LOOKUPs, wanted >= $lookups"; fail=1; }
    served=-1 others=0 d=""
    q=0
    while [ $q -lt "$want_q" ]; do
      eval "dq=\$(( $(qget $q requests) - r0_$q ))"
      eval "r0_$q=\$(( r0_$q + dq ))"
      [ "$dq" -gt 0 ] && d="$d q$q=+$dq"
      if [ "$dq" -ge "$lookups" ]; then
        [ $served = -1 ] && served=$q || others=$((others + 1))
      fi
      q=$((q + 1))
    done
    echo "RESULT product_uring_reduced phase=$phase module=$MODULE cpu=$c lookups_served_by=$served lookup_deltas$d"
    [ $served != -1 ] && [ $others = 0 ] ||
      { echo "FAIL: CPU $c's $lookups LOOKUPs were not served by one queue ($d)"; fail=1; }
    [ "$want_q" = "$ncpu" ] && [ "$served" != "$c" ] &&
      { echo "FAIL: with one queue per CPU, CPU $c's LOOKUPs went to queue $served"; fail=1; }
    map="$map $served"
    # The CPU's data: written and fsync'ed, then read back with the page cache dropped.
    timeout $T taskset -c $c dd if=/tmp/src of=$MNT/d$c bs=256k conv=fsync 2>/dev/null ||
      give_up "write of $mib MiB from CPU $c (exit $?)"
    echo 3 > /proc/sys/vm/drop_caches
    got=$(timeout $T taskset -c $c md5sum $MNT/d$c) || give_up "read back on CPU $c"
    [ "${got%% *}" = "$sum" ] ||
      { echo "FAIL: CPU $c: $MNT/d$c reads back with md5 ${got%% *}, wrote $sum"; fail=1; }
    c=$((c + 1))
  done
  bounded_stat || give_up "stripefs stat at the end"
  data_deltas $((ncpu - 1))
  # Per queue: total requests, and how many CPUs' LOOKUPs it served.
  line="" min=$((ncpu / want_q - 1))
  [ $min -ge 1 ] || min=1
  q=0 nserved=0
  while [ $q -lt "$want_q" ]; do
    n=0
    for s in $map; do [ "$s" = $q ] && n=$((n + 1)); done
    r=$(qget $q requests)
    line="$line q$q=${r:-0}req/${n}cpus"
    [ "${r:-0}" -gt 0 ] && nserved=$((nserved + 1))
    [ "$want_q" != "$ncpu" ] && [ $n -lt $min ] &&
      { echo "FAIL: queue $q served the LOOKUPs of $n CPUs, wanted >= $min (map:$map)"; fail=1; }
    q=$((q + 1))
  done
  [ -z "$(qget "$want_q" requests)" ] ||
    { echo "FAIL: the daemon reports a queue $want_q beyond the $want_q it registered"; fail=1; }
  [ $nserved = "$want_q" ] ||
    { echo "FAIL: $nserved of $want_q queues served requests ($line)"; fail=1; }
  echo "RESULT product_uring_reduced phase=$phase module=$MODULE outcome=served queues=$want_q cpu_to_queue=$(echo $map | tr ' ' ,)$line"
  sf_umount
done
finish
