#!/bin/bash
# Usage: bench_cluster_smoke.sh STRIPEFS_BINARY
# Runs `stripefs bench cluster --quick` into a temporary dir and checks the
# outputs parse: results.json loads and has rows with numeric MiB/s, IOPS and
# latency for the healthy and degraded phases, results.csv has data rows, and
# results.md has a markdown table. Exit 77 = skipped (reason on stderr).
set -u
bin=$1
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount, drop_caches)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fio >/dev/null || skip "fio not installed"
[ -x /usr/bin/python3 ] || command -v python3 >/dev/null || skip "no python3"
out=$(mktemp -d /tmp/stripefs-bench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$bin" bench cluster --quick --out "$out/res" || {
  echo "FAIL: stripefs bench cluster --quick exited $?" >&2; exit 1; }
if grep -q stripefs-bench- /proc/mounts; then
  echo "FAIL: a bench mount was left behind" >&2; exit 1
fi
py=/usr/bin/python3; [ -x $py ] || py=python3
$py - "$out/res" <<'PYEOF'
import csv, json, os, sys
d = sys.argv[1]
res = json.load(open(os.path.join(d, "results.json")))
rows = res["rows"]
assert res["meta"]["complete"], "run did not complete"
phases = {r["phase"] for r in rows if r["target"] == "stripefs"}
assert {"healthy", "degraded", "repair"} <= phases, phases
for r in rows:
    for k in ("mib_s", "iops", "lat_mean_us"):
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
assert any(r["counters"].get("degraded_reads", 0) > 0
           for r in rows if r["phase"] == "degraded"), "no degraded reads counted"
assert res["repair"]["exit_code"] == 0, res["repair"]
with open(os.path.join(d, "results.csv")) as f:
    data = list(csv.DictReader(f))
assert len(data) == len(rows) and len(data) >= 3, len(data)
md = open(os.path.join(d, "results.md")).read().splitlines()
assert any(l.startswith("|---") for l in md), "no markdown table"
assert sum(1 for l in md if l.startswith("| ")) >= len(rows) + 1
print("bench smoke: %d rows, phases %s, outputs parse" % (len(rows), sorted(phases)))
PYEOF
