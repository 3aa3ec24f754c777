#!/bin/bash
# Usage: transport_smoke.sh STRIPEFS_BINARY [SOURCE_DIR]
# Runs `stripefs bench transport --quick` into a temporary dir and checks that
# it worked and its outputs parse: results.json complete with numeric rows for
# every target it ran (stripefs over /dev/fuse always; over io-uring when the
# kernel has the enable_uring knob, and then every uring mount must have been
# reported as "uring" by `stripefs stat`), results.csv has one line per run,
# results.md has the median table with a uring/dev column; enable_uring is
# back to its old value and no mount is left. Never checks timing.
# Exit 77 = skipped (reason on stderr).
set -u
bin=$1
# The driver script of this source tree (the binary may live in a build dir
# outside it, where `stripefs bench` cannot find the script by itself).
script=()
[ -n "${2:-}" ] && script=(--script "$2/bench/fuse/transport_bench.py")
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount, drop_caches, enable_uring)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fio >/dev/null || skip "fio not installed"
[ -x /usr/bin/python3 ] || command -v python3 >/dev/null || skip "no python3"
knob=/sys/module/fuse/parameters/enable_uring
before=$(cat $knob 2>/dev/null || echo none)
out=$(mktemp -d /tmp/stripefs-tbench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/work"
"$bin" bench transport "${script[@]}" --quick --workdir "$out/work" \
  --out "$out/res" || {
  echo "FAIL: stripefs bench transport --quick exited $?" >&2; exit 1; }
after=$(cat $knob 2>/dev/null || echo none)
if [ "$before" != "$after" ]; then
  echo "FAIL: $knob was $before before the run and is $after after" >&2
  exit 1
fi
# Only this run's mounts count (other runs may be going on at the same time).
if grep -q "$out/work" /proc/mounts; then
  echo "FAIL: a transport bench mount was left behind" >&2; exit 1
fi
py=/usr/bin/python3; [ -x $py ] || py=python3
$py - "$out/res" "$before" <<'PYEOF'
import csv, json, os, sys
d, knob_before = sys.argv[1], sys.argv[2]
res = json.load(open(os.path.join(d, "results.json")))
rows, meta = res["rows"], res["meta"]
assert meta["complete"], "run did not complete"
targets = {r["target"] for r in rows}
assert "stripefs-dev" in targets, targets
if knob_before != "none":
    assert "stripefs-uring" in targets, targets
    um = [m for m in res["mounts"] if m["transport"] == "uring"]
    assert um and all(m["stat_transport"] == "uring" for m in um), um
    # the FUSE requests of a uring mount went through uring queues
    ur = [r for r in rows if r["target"] == "stripefs-uring"]
    assert any(any(k.startswith("uring/") for k in r["queue_requests"])
               for r in ur), [r["queue_requests"] for r in ur]
for m in res["mounts"]:
    assert m["stat_transport"] == m["transport"], m
for r in rows:
    for k in ("iops", "mib_s", "lat_mean_us"):
        assert isinstance(r[k], (int, float)) and r[k] > 0, (k, r)
for r in rows:
    if r["target"].startswith("stripefs"):
        assert r["fuse_requests"] and r["fuse_requests"] > 0, r
with open(os.path.join(d, "results.csv")) as f:
    data = list(csv.DictReader(f))
assert len(data) == len(rows) and len(rows) >= 4, (len(data), len(rows))
md = open(os.path.join(d, "results.md")).read()
assert "| job | unit |" in md and "uring/dev" in md, md[:300]
jobs = {r["job"] for r in rows}
for j in jobs:
    assert f"| {j} |" in md, j
print("transport smoke: %d runs, targets %s, outputs parse"
      % (len(rows), sorted(targets)))
PYEOF
