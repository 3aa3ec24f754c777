#!/bin/bash
# Usage: bench_cluster_smoke.sh STRIPEFS_BINARY [SOURCE_DIR]
# Runs `stripefs bench cluster --quick` into a temporary dir and checks the
# outputs parse: results.json loads and has rows with MiB/s, IOPS and
# latency > 0 (a job that moved nothing fails) for the healthy and degraded
# phases (and io-uring rows when the kernel has the enable_uring knob, which
# must be restored), results.csv has data rows, and results.md has a markdown
# table. Then a one-point
# `--sweep --quick` run and its sweep/ outputs. Never checks timing.
# Exit 77 = skipped (reason on stderr).
set -u
bin=$1
# The driver script of this source tree (the binary may live in a build dir
# outside it, where `stripefs bench` cannot find the script by itself).
script=()
[ -n "${2:-}" ] && script=(--script "$2/bench/cluster/bench_cluster.py")
skip() { echo "SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount, drop_caches)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fio >/dev/null || skip "fio not installed"
[ -x /usr/bin/python3 ] || command -v python3 >/dev/null || skip "no python3"
knob=/sys/module/fuse/parameters/enable_uring
before=$(cat $knob 2>/dev/null || echo none)
out=$(mktemp -d /tmp/stripefs-bench-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
"$bin" bench cluster "${script[@]}" --quick --out "$out/res" || {
  echo "FAIL: stripefs bench cluster --quick exited $?" >&2; exit 1; }
if grep -q stripefs-bench- /proc/mounts; then
  echo "FAIL: a bench mount was left behind" >&2; exit 1
fi
after=$(cat $knob 2>/dev/null || echo none)
if [ "$before" != "$after" ]; then
  echo "FAIL: $knob was $before before the run and is $after after" >&2
  exit 1
fi
"$bin" bench cluster "${script[@]}" --quick --sweep --sweep-servers 6 \
  --sweep-geometries 4+2 --out "$out/res" || {
  echo "FAIL: stripefs bench cluster --quick --sweep exited $?" >&2; exit 1; }
if grep -q stripefs-bench- /proc/mounts; then
  echo "FAIL: a sweep mount was left behind" >&2; exit 1
fi
py=/usr/bin/python3; [ -x $py ] || py=python3
$py - "$out/res" "$before" <<'PYEOF'
import csv, json, os, sys
d, knob_before = sys.argv[1], sys.argv[2]
res = json.load(open(os.path.join(d, "results.json")))
rows = res["rows"]
assert res["meta"]["complete"], "run did not complete"
phases = {r["phase"] for r in rows if r["target"] == "stripefs"}
assert {"healthy", "degraded", "repair"} <= phases, phases
for r in rows:
    for k in ("mib_s", "iops", "lat_mean_us"):
        assert isinstance(r[k], (int, float)) and r[k] > 0, (k, r)
assert any(r["counters"].get("degraded_reads", 0) > 0
           for r in rows if r["phase"] == "degraded"), "no degraded reads counted"
assert res["repair"]["exit_code"] == 0, res["repair"]
with open(os.path.join(d, "results.csv")) as f:
    data = list(csv.DictReader(f))
assert len(data) == len(rows) and len(data) >= 3, len(data)
md = open(os.path.join(d, "results.md")).read().splitlines()
assert any(l.startswith("|---") for l in md), "no markdown table"
assert sum(1 for l in md if l.startswith("| ")) >= len(rows) + 1
if knob_before != "none":
    ur = [r for r in rows if r["target"] == "stripefs-uring"]
    assert ur, "no io-uring rows although the kernel has enable_uring"
for png in ("throughput.png", "latency.png"):
    assert os.path.getsize(os.path.join(d, png)) > 0, png
sw = json.load(open(os.path.join(d, "sweep", "results.json")))
assert sw["meta"]["complete"], sw.get("errors")
assert {(r["servers"], r["k"], r["m"]) for r in sw["rows"]} == {(6, 4, 2)}
assert {r["phase"] for r in sw["rows"]} == {"healthy", "degraded"}
for r in sw["rows"]:
    assert isinstance(r["mib_s"], (int, float)) and r["mib_s"] > 0, r
with open(os.path.join(d, "sweep", "results.csv")) as f:
    assert len(list(csv.DictReader(f))) == len(sw["rows"])
assert "| 4+2 | 6 |" in open(os.path.join(d, "sweep", "results.md")).read()
assert os.path.getsize(os.path.join(d, "sweep", "sweep.png")) > 0
print("bench smoke: %d rows, phases %s, sweep %d rows, outputs parse"
      % (len(rows), sorted(phases), len(sw["rows"])))
PYEOF
