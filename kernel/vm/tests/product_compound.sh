# Compound OPEN+GETATTR through the product (patch 6 of the series, FUSE_COMPOUND).
# Usage: product_compound [N]   (N files, default 200)
# `stripefs mount` of an embedded volume; N files of 1000 bytes, each opened once (warm-up:
# stripefs's close-to-open check sends an attribute invalidation at the first open of a file
# written since its CREATE, which would void the compound's GETATTR); after their attributes
# have expired (attribute timeout 1 s, slept 2 s; names kept for 600 s so no LOOKUP
# refreshes them; no_default_permissions so no permission check refreshes them), open_stat
# opens, fstats and closes each once. Counted with `stripefs stat --json` (requests by
# opcode; the queues' request counts are the kernel round trips):
#   --compound on:     compound agreed; every open is one COMPOUND carrying OPEN+GETATTR
#                      (COMPOUND = OPEN = N), sizes right, and the fstat after it is
#                      served from the compound's attributes (GETATTR = N).
#   --compound off:    not agreed; no COMPOUND, OPEN = N, each fstat a GETATTR (>= N).
#   --compound enosys: agreed, then refused: exactly one COMPOUND (the kernel falls back
#                      for good after the first ENOSYS), OPEN = N, opens still work; a
#                      second pass sends no COMPOUND either.
# Prints round trips per open+fstat+close and opens/s for on and off (TCG: a ratio only).
. ./lib.sh
. ./product_lib.sh
N=${1:-200}
SIZE=1000
OPTS="--entry-timeout-ms 600000 -o no_allow_other -o no_default_permissions"

# total_requests: kernel round trips so far (sum of the queues' request counts).
total_requests() { sed -n 's/^queues\.[0-9]*\.requests=//p' "$STAT_FLAT" | awk '{ s += $1 } END { print s + 0 }'; }
op() { v=$(jget "requests_by_opcode.$1"); echo "${v:-0}"; }

# pass MODE: one open_stat pass over the N files; sets d_compound d_open d_getattr d_trips rate.
pass() {
  sf_stat
  c0=$(op COMPOUND) o0=$(op OPEN) g0=$(op GETATTR) t0=$(total_requests)
  out=$(open_stat "$MNT" "$N" "$SIZE")
  rc=$?
  echo "$out"
  [ $rc = 0 ] || { echo "FAIL: open_stat failed in mode $1 (status $rc)"; fail=1; }
  rate=$(echo "$out" | sed -n 's/.*opens_per_s=\([0-9.]*\).*/\1/p')
  sf_stat
  d_compound=$(( $(op COMPOUND) - c0 )) d_open=$(( $(op OPEN) - o0 ))
  d_getattr=$(( $(op GETATTR) - g0 )) d_trips=$(( $(total_requests) - t0 ))
  echo "RESULT product_compound module=$MODULE mode=$1 n=$N compound=$d_compound open=$d_open" \
    "getattr=$d_getattr round_trips=$d_trips round_trips_per_open=$(awk -v t="$d_trips" -v n="$N" 'BEGIN { printf "%.2f", t / n }')" \
    "opens_per_s=$rate"
}

# run_mode MODE [warm]: mount with --compound MODE, make the files, (warm: open each once),
# let their attributes expire.
run_mode() {
  sf_mount --compound "$1" $OPTS
  i=0
  while [ $i -lt "$N" ]; do
    head -c "$SIZE" /dev/zero > "$MNT/f$i" || { echo "FAIL: cannot create $MNT/f$i"; fail=1; break; }
    i=$((i + 1))
  done
  must sync
  sf_stat
  echo "RESULT product_compound module=$MODULE mode=$1 offered=$(jget negotiated.compound_offered) agreed=$(jget negotiated.compound_agreed)"
  if [ "${2:-}" = warm ]; then
    sleep 2
    open_stat "$MNT" "$N" "$SIZE" > /dev/null || { echo "FAIL: warm-up open_stat failed in mode $1"; fail=1; }
  fi
  sleep 2
}

run_mode on warm
[ "$(jget negotiated.compound_offered)" = true ] ||
  { echo "FAIL: the $MODULE module does not offer FUSE_HAS_COMPOUND"; fail=1; }
[ "$(jget negotiated.compound_agreed)" = true ] || { echo "FAIL: compound not agreed with --compound on"; fail=1; }
pass on
on_trips=$d_trips on_rate=$rate
[ "$d_compound" = "$N" ] || { echo "FAIL: $d_compound COMPOUND requests for $N opens, wanted $N"; fail=1; }
[ "$d_open" = "$N" ] || { echo "FAIL: $d_open OPENs served for $N opens, wanted $N (inside the compounds)"; fail=1; }
[ "$d_getattr" -ge "$N" ] || { echo "FAIL: $d_getattr GETATTRs, wanted >= $N (one in each compound)"; fail=1; }
sf_umount

run_mode off warm
[ "$(jget negotiated.compound_agreed)" = false ] || { echo "FAIL: compound agreed with --compound off"; fail=1; }
pass off
off_trips=$d_trips off_rate=$rate
[ "$d_compound" = 0 ] || { echo "FAIL: $d_compound COMPOUND requests with --compound off, wanted 0"; fail=1; }
[ "$d_open" = "$N" ] || { echo "FAIL: $d_open OPENs for $N opens"; fail=1; }
[ "$d_getattr" -ge "$N" ] || { echo "FAIL: $d_getattr GETATTRs, wanted >= $N (every fstat after expiry)"; fail=1; }
[ "$on_trips" -lt "$off_trips" ] ||
  { echo "FAIL: $on_trips round trips with compounds, not fewer than $off_trips without"; fail=1; }
sf_umount

run_mode enosys
[ "$(jget negotiated.compound_agreed)" = true ] || { echo "FAIL: compound not agreed with --compound enosys"; fail=1; }
pass enosys
[ "$d_compound" = 1 ] ||
  { echo "FAIL: $d_compound COMPOUND requests after ENOSYS, wanted exactly 1 (the kernel must stop)"; fail=1; }
[ "$d_open" = "$N" ] || { echo "FAIL: $d_open OPENs for $N opens after the fallback"; fail=1; }
sleep 2
pass enosys_again
[ "$d_compound" = 0 ] || { echo "FAIL: $d_compound COMPOUND requests on a second pass after ENOSYS, wanted 0"; fail=1; }
sf_umount

echo "RESULT product_compound module=$MODULE n=$N round_trips_on=$on_trips round_trips_off=$off_trips" \
  "trip_ratio=$(awk -v a="$on_trips" -v b="$off_trips" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')" \
  "opens_per_s_on=$on_rate opens_per_s_off=$off_rate" \
  "rate_ratio=$(awk -v a="$on_rate" -v b="$off_rate" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')"
finish
