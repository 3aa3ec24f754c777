#!/bin/bash
# Usage: write_bench_smoke.sh STRIPEFS_BINARY [SOURCE_DIR]
# Runs `stripefs bench write --quick` at its smallest sizes into a temporary
# dir and checks: every row b-h produced a positive figure, reference and
# ratio (rows b and c also a CPU ceiling); row a did too when the chunk-store
# bench binary is built (build/bench/chunk/), and otherwise says "not built"
# (printed as a NOTE);
# results.csv/md parse; no mount is left under the work dir and
# max_pages_limit is back to its old value. Never checks timing.
# Exit 77 = skipped (reason on stderr).
set -u
bin=$1
script=()
[ -n "${2:-}" ] && script=(--script "$2/bench/write/write_bench.py")
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount, max_pages_limit)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fio >/dev/null || skip "fio not installed"
[ -x /usr/bin/python3 ] || command -v python3 >/dev/null || skip "no python3"
knob=/proc/sys/fs/fuse/max_pages_limit
before=$(cat $knob 2>/dev/null || echo none)
out=$(mktemp -d /var/tmp/stripefs-wbench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/work"
"$bin" bench write "${script[@]}" --quick --size 16 --stripe-size 8 \
  --rand-size 4 --runtime 1 --files 100 --workdir "$out/work" \
  --out "$out/res"
rc=$?
# Exit 1 = a row failed (checked below, with its reason); others are fatal.
[ $rc = 0 ] || [ $rc = 1 ] || { echo "FAIL: bench write exited $rc" >&2; exit 1; }
after=$(cat $knob 2>/dev/null || echo none)
if [ "$before" != "$after" ]; then
  echo "FAIL: $knob was $before before the run and is $after after" >&2
  exit 1
fi
if grep -q "$out/work" /proc/mounts; then
  echo "FAIL: a write bench mount was left behind" >&2; exit 1
fi
chunk_bench=$(dirname "$(dirname "$(readlink -f "$bin")")")/bench/chunk/chunk_store_bench
py=/usr/bin/python3; [ -x $py ] || py=python3
$py - "$out/res" "$chunk_bench" <<'PYEOF'
import csv, json, os, sys
d, chunk_bench = sys.argv[1], sys.argv[2]
res = json.load(open(os.path.join(d, "results.json")))
rows = {r["row"]: r for r in res["rows"]}
assert sorted(rows) == list("abcdefgh"), sorted(rows)
assert res["meta"]["complete"], "run did not complete"
for k, r in rows.items():
    if k == "a" and not os.access(chunk_bench, os.X_OK):
        assert r["status"] == "not built", r
        print(f"NOTE: row a not built (no {chunk_bench}): {r['error']}")
        continue
    assert r["status"] in ("meets goal", "misses goal"), r
    for f in ("value", "reference", "ratio"):
        assert isinstance(r[f], (int, float)) and r[f] > 0, (k, f, r)
for k in ("b", "c", "h"):
    if "syncs_per_mib" in rows[k]:
        assert rows[k]["syncs_per_mib"] > 0, rows[k]
for k in ("b", "c"):  # the CPU ceiling of the sequential rows
    assert rows[k]["cpu_ms_per_mib"] > 0, rows[k]
    assert rows[k]["cpu_bound_mib_s"] > 0, rows[k]
with open(os.path.join(d, "results.csv")) as f:
    assert len(list(csv.DictReader(f))) == 8
md = open(os.path.join(d, "results.md")).read()
assert "| row | what | ratio |" in md and "load average" in md, md[:300]
print("write bench smoke: rows %s, outputs parse"
      % " ".join(f"{k}={r['status']}" for k, r in sorted(rows.items())))
PYEOF
