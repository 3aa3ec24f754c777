#!/usr/bin/python3
"""stripefs read-path benchmark: every row against a reference measured in
the same run, printed as one `ratio=` line per row with the load average.

Rows (issue 15, the file-system half):
  a  embedded mount, 4 KiB randread O_DIRECT QD1, IOPS vs passthrough_ll
     over a directory of the same disk                               >= 0.5
  b  6-server 4+2 cluster mount, same job, vs passthrough_ll          >= 0.3
  c  cluster, 1 MiB sequential read O_DIRECT QD1, MiB/s vs the same
     fio job reading a file on the disk with O_DIRECT                 >= 0.8
  d  cluster, the job of row c with one chunkd killed, vs healthy     >= 0.8
  e  mount daemon CPU per 4 KiB read of row b (utime+stime from
     /proc/<pid>/stat over the job / reads), us                        <= 25
Page caches are dropped before every read job (the chunk files and the
reference files are on the same disk). Rows a and b are warm on both sides:
stripefs reads 4 KiB through its chunk store's page cache (small reads are
buffered), so its reference passthrough_ll runs with -o cache=never (every
read a FUSE round trip, as O_DIRECT on stripefs) and fio reads it without
O_DIRECT, so passthrough_ll's backing reads use the page cache too. Both
start cold (caches dropped) and warm over the job alike.

Outputs go to --out (default: a fresh directory read-bench-<time> under the
current directory): results.json, results.csv, results.md. The committed
table (docs/results/read/) changes only with --update-docs. Mounts, the
cluster and passthrough_ll are always stopped (finally block, also on
Ctrl-C/SIGTERM/SIGHUP). Usually started as `stripefs bench read`.
"""
import argparse
import csv
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lib import fio, knobs, passthrough, perf, run, sampling  # noqa: E402
from lib.stripefs import Cluster, Stripefs, require_binary  # noqa: E402

# key -> (what, goal comparison, goal)
ROWS = {
    "a": ("embedded, 4 KiB randread direct QD1, vs passthrough_ll, both warm",
          ">=", 0.5),
    "b": ("cluster 6x 4+2, 4 KiB randread direct QD1, vs passthrough_ll, "
          "both warm", ">=", 0.3),
    "c": ("cluster, 1 MiB seq read direct QD1, vs fio O_DIRECT read of the "
          "disk", ">=", 0.8),
    "d": ("cluster, 1 MiB seq read direct QD1, one server down, vs healthy",
          ">=", 0.8),
    "e": ("cluster mount daemon CPU per 4 KiB read (row b)", "<=", 25.0),
}


class ReadBench:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="stripefs-rbench-",
                                     dir=a.workdir)
        self.log = run.Log()
        self.sf = Stripefs(a.stripefs)
        self.cluster = Cluster(self.sf, os.path.join(self.work, "cluster"))
        self.mounted = []
        self.pt = None
        self.m = {}  # measurement name -> figures, or {"error": text}
        self.profile = None  # flat perf profile of the daemon (--profile)

    def teardown(self):
        for mnt in list(self.mounted):
            self.sf.umount(mnt)
            self.mounted.remove(mnt)
        if self.pt:
            self.pt.stop()
            self.pt = None
        self.cluster.down()
        run.remove_work(self.work, self.log)

    def mount(self, mnt, *argv):
        """`stripefs mount ARGV` with the mountpoint `mnt` in it."""
        os.makedirs(mnt, exist_ok=True)
        pid, _ = self.sf.mount(*argv, "--transport=dev", *self.a.mount_arg)
        self.mounted.append(mnt)
        self.log(f"mounted {mnt} (daemon pid {pid})")
        return pid

    def measure(self, name, fn):
        """fn() -> figures; a failure is recorded for its row only."""
        try:
            self.m[name] = fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:
            self.log(f"{name} failed: {e}")
            self.m[name] = {"error": str(e)}
        return self.m[name]

    def fio_read(self, directory, name, args, pid=None, others=None):
        """One fio read job after dropping caches; figures, the load
        average and the CPU seconds of `pid` (the FUSE daemon) and of
        `others` ({name: pid}, e.g. the cluster's servers) during it."""
        knobs.drop_caches(self.log)
        pids = dict(others or {})
        if pid:
            pids["daemon"] = pid
        meter = sampling.CpuMeter(pids).start()
        cs0 = sampling.proc_ctx_switches(pid) if pid else None
        la = sampling.loadavg()
        res = fio.run(directory, name, args, self.a.job_timeout)
        out = fio.summarize(res, "read")
        out["cpu_s"] = meter.stop()
        cs1 = sampling.proc_ctx_switches(pid) if pid else None
        if cs0 and cs1:
            out["daemon_ctxsw"] = {"voluntary": cs1[0] - cs0[0],
                                   "involuntary": cs1[1] - cs0[1]}
        out["loadavg_1m"] = la[0]
        self.log(f"{name:24s} {out['mib_s']:8.1f} MiB/s {out['iops']:8.0f} "
                 f"IOPS (load {la[0]:.1f})")
        return out

    def lay_file(self, directory, filename, mib):
        """Writes the file the read jobs read (buffered, fsynced)."""
        fio.run(directory, "lay-" + filename,
                ["--rw=write", "--bs=1M", f"--size={mib}M", "--end_fsync=1",
                 f"--filename={filename}"], self.a.job_timeout)

    def rand4k(self, filename, direct=True):
        return ["--rw=randread", "--bs=4k", f"--direct={1 if direct else 0}",
                f"--size={self.a.rand_size}M", f"--filename={filename}",
                "--time_based", f"--runtime={self.a.runtime}",
                "--norandommap"]

    def seq1m(self, filename):
        return ["--rw=read", "--bs=1M", "--direct=1",
                f"--size={self.a.size}M", f"--filename={filename}"]

    # ------------------------------------------------------------ phases
    def disk_and_passthrough(self):
        disk = os.path.join(self.work, "disk")
        os.makedirs(disk)
        if self.want("c"):
            self.lay_file(disk, "seq", self.a.size)
            self.measure("disk-seq1m", lambda: self.fio_read(
                disk, "disk-seq1m", self.seq1m("seq")))
            os.unlink(os.path.join(disk, "seq"))
        if not self.want("a", "b"):
            return
        exe = passthrough.build(self.work, self.log)
        if not exe:
            self.m["pt-rand4k"] = {"error": "passthrough_ll not built"}
            return
        mnt = os.path.join(self.work, "pt")
        # Warm like stripefs (see the top of this file): no kernel cache of
        # the FUSE file (cache=never: each read reaches passthrough_ll), and
        # buffered reads of the backing file.
        self.pt = passthrough.Passthrough(exe, disk, mnt,
                                          ["cache=never"]).start()
        self.lay_file(mnt, "rand", self.a.rand_size)
        self.measure("pt-rand4k", lambda: self.fio_read(
            mnt, "pt-rand4k", self.rand4k("rand", direct=False), self.pt.pid))
        self.pt.stop()
        self.pt = None

    def embedded(self):
        mnt = os.path.join(self.work, "emb")
        pid = self.mount(mnt, os.path.join(self.work, "vol"), mnt, "--k",
                         self.a.k, "--m", self.a.m)
        self.lay_file(mnt, "rand", self.a.rand_size)
        self.measure("emb-rand4k", lambda: self.fio_read(
            mnt, "emb-rand4k", self.rand4k("rand"), pid))
        self.sf.umount(mnt)
        self.mounted.remove(mnt)

    def cluster_phase(self):
        a = self.a
        self.cluster.up(a.servers, a.k, a.m, 256 * 1024)
        mnt = os.path.join(self.work, "cl")
        pid = self.mount(mnt, *self.cluster.mount_args(), mnt)
        self.lay_file(mnt, "rand", a.rand_size)
        if self.want("b", "e"):
            self.measure("cl-rand4k", lambda: self.fio_read(
                mnt, "cl-rand4k", self.rand4k("rand"), pid))
        if self.want("c", "d"):
            self.lay_file(mnt, "seq", a.size)
            self.measure("cl-seq1m", lambda: self.fio_read(
                mnt, "cl-seq1m", self.seq1m("seq"), pid,
                self.cluster.pids()))
        if not self.want("d"):
            self.m["cl-stat"] = self.sf.stat(mnt).get("backend", {})
            return
        self.sf.run("cluster", "kill", "--dir", self.cluster.dir, "--server",
                    a.victim, "--signal", "9")
        self.log(f"killed chunkd {a.victim}; waiting for metad to mark it "
                 f"down")
        time.sleep(4)
        self.measure("cl-seq1m-degraded", lambda: self.fio_read(
            mnt, "cl-seq1m-degraded", self.seq1m("seq"), pid))
        self.m["cl-stat"] = self.sf.stat(mnt).get("backend", {})
        if a.profile:
            # One more (unmeasured) 4 KiB job under a flat profile of the
            # mount daemon, for row e.
            prof = perf.Profiler({"mount": pid}, self.log).start()
            try:
                fio.run(mnt, "cl-rand4k-profiled", self.rand4k("rand"),
                        a.job_timeout)
            except RuntimeError as e:
                self.log(f"profiled job failed: {e}")
            self.profile = prof.stop()

    def want(self, *rows):
        return any(r in self.a.rows for r in rows)

    def run(self):
        self.disk_and_passthrough()
        if self.want("a"):
            self.embedded()
        if self.want("b", "c", "d", "e"):
            self.cluster_phase()


def ratio_row(key, m, num, den, field, unit):
    what, cmp, goal = ROWS[key]
    r = {"row": key, "what": what, "goal": f"{cmp} {goal}", "unit": unit,
         "value": None, "reference": None, "ratio": None}
    n, d = m.get(num, {}), m.get(den, {})
    if field not in n or field not in d:
        r["status"] = "failed"
        r["error"] = n.get("error") or d.get("error") or "not measured"
        return r
    r["value"], r["reference"] = n[field], d[field]
    r["loadavg_1m"] = n.get("loadavg_1m")
    r["ratio"] = n[field] / d[field] if d[field] else None
    ok = r["ratio"] is not None and r["ratio"] >= goal
    r["status"] = "met" if ok else "missed"
    return r


def cpu_row(m):
    what, cmp, goal = ROWS["e"]
    r = {"row": "e", "what": what, "goal": f"{cmp} {goal}", "unit": "us",
         "value": None, "reference": goal, "ratio": None}
    f = m.get("cl-rand4k", {})
    cpu = f.get("cpu_s", {}).get("daemon")
    if cpu is None or not f.get("ios"):
        r["status"] = "failed"
        r["error"] = f.get("error") or "no daemon CPU figure"
        return r
    r["value"] = cpu * 1e6 / f["ios"]
    cs = f.get("daemon_ctxsw")
    if cs:
        r["ctxsw_per_read"] = round(
            (cs["voluntary"] + cs["involuntary"]) / f["ios"], 2)
    r["ratio"] = r["value"] / goal  # <= 1 meets the goal
    r["fixed_goal"] = True  # no reference measured: printed goal_ratio=
    r["loadavg_1m"] = f.get("loadavg_1m")
    r["status"] = "met" if r["value"] <= goal else "missed"
    return r


def all_rows(m, rows="abcde"):
    return [r for r in all_rows_unfiltered(m) if r["row"] in rows]


def all_rows_unfiltered(m):
    return [ratio_row("a", m, "emb-rand4k", "pt-rand4k", "iops", "IOPS"),
            ratio_row("b", m, "cl-rand4k", "pt-rand4k", "iops", "IOPS"),
            ratio_row("c", m, "cl-seq1m", "disk-seq1m", "mib_s", "MiB/s"),
            ratio_row("d", m, "cl-seq1m-degraded", "cl-seq1m", "mib_s",
                      "MiB/s"),
            cpu_row(m)]


def row_line(r):
    """The one line a row prints: `ratio=` first, then figures and load."""
    head = f"row {r['row']}: {r['what']}:"
    if r["status"] == "failed":
        return f"{head} ratio=- FAILED: {r.get('error')}"
    # A ratio to a fixed goal is no ratio to a reference measured in the run.
    key = "goal_ratio" if r.get("fixed_goal") else "ratio"
    return (f"{head} {key}={r['ratio']:.3f} (goal {r['goal']}: "
            f"{r['status']}) value={run.fmtn(r['value'])} {r['unit']} "
            f"reference={run.fmtn(r['reference'])} load={r.get('loadavg_1m')}"
            + (f" ctxsw/read={r['ctxsw_per_read']}"
               if "ctxsw_per_read" in r else ""))


CSV_COLS = ["row", "what", "status", "ratio", "goal", "value", "unit",
            "reference", "loadavg_1m", "error"]


def write_outputs(out, rows, m, meta, quick):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "measurements": m}, f,
                  indent=1)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    la0 = "/".join(str(x) for x in meta["loadavg_start"])
    la1 = "/".join(str(x) for x in meta.get("loadavg_end", []))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"stripefs read bench{' (quick)' if quick else ''}, "
                f"{meta['date']}, commit {meta.get('commit')}, kernel "
                f"{meta['kernel']}, {meta['cpus']} CPUs; load average "
                f"(1/5/15 min) {la0} at start, {la1} at end; "
                f"{meta.get('wall_s')} s.\n\n")
        f.write("| row | what | ratio | goal | status | value | reference "
                "| load 1m |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            val = (f"{run.fmtn(r['value'])} {r['unit']}"
                   if r["value"] is not None else r.get("error", "-"))
            ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
            if r.get("fixed_goal") and r["ratio"] is not None:
                ratio += " (to the fixed goal)"
            f.write(f"| {r['row']} | {r['what']} | {ratio} | {r['goal']} | "
                    f"{r['status']} | {val} | {run.fmtn(r['reference'])} | "
                    f"{r.get('loadavg_1m', '-')} |\n")
        f.write("\nRaw figures per measurement (fio MiB/s, IOPS, latency "
                "us, CPU s of the FUSE daemon; cl-stat: the cluster mount's "
                "backend counters at the end):\n\n")
        for name, fig in m.items():
            f.write(f"- {name}: {json.dumps(fig, sort_keys=True)}\n")


# option, full run, --quick, what it sets
SIZES = [
    ("size", 1024, 256, "MiB of the sequential 1 MiB read file"),
    ("rand_size", 256, 64, "MiB of the 4 KiB random-read file"),
    ("runtime", 20, 5, "s of each 4 KiB random-read job"),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    run.add_size_args(p, SIZES, "256 MiB sequential file, 64 MiB random "
                      "file, 5 s random jobs: a few minutes")
    for opt, default in (("--servers", 6), ("--k", 4), ("--m", 2)):
        p.add_argument(opt, type=int, default=default)
    p.add_argument("--victim", type=int, default=1,
                   help="chunkd id killed for row d")
    p.add_argument("--workdir", default="/var/tmp",
                   help="where every store, mount and the disk reference "
                        "live (default /var/tmp: a disk, not tmpfs)")
    p.add_argument("--out", default=None,
                   help="results directory (default: a fresh "
                        "read-bench-<time> under the current directory)")
    p.add_argument("--update-docs", action="store_true",
                   help="also write the tables to docs/results/read/")
    p.add_argument("--job-timeout", type=int, default=600)
    p.add_argument("--profile", action="store_true",
                   help="after the cluster rows, one more 4 KiB random-read "
                        "job (degraded cluster) under a flat perf profile "
                        "of the mount daemon, written to OUT/profile.md")
    p.add_argument("--stripefs", default=None)
    p.add_argument("--mount-arg", action="append", default=[],
                   help="extra `stripefs mount` argument for every mount "
                        "(repeatable), e.g. --mount-arg=--dev-wait=poll")
    p.add_argument("--rows", default="abcde",
                   help="rows to measure, e.g. abe (default all; only the "
                        "jobs those rows need run)")
    a = p.parse_args()
    run.resolve_sizes(a, SIZES)
    if a.update_docs and sorted(set(a.rows)) != list("abcde"):
        p.error("--update-docs writes the whole table: measure every row")
    if a.out is None:
        a.out = run.fresh_out("read-bench", "read_bench")
    a.stripefs = require_binary("read_bench", a.stripefs)
    run.require_mount_host("read_bench", "mounts, drop_caches")
    return a


def main():
    a = parse_args()
    run.raise_on_signals()
    b = ReadBench(a)
    meta = run.host_meta()
    meta.update({"commit": run.git_commit(ROOT), "quick": a.quick,
                 "size_mib": a.size, "rand_size_mib": a.rand_size,
                 "runtime_s": a.runtime, "servers": a.servers, "k": a.k,
                 "m": a.m, "workdir": a.workdir, "rows": a.rows})
    rc = run.timed(b, meta)
    rows = all_rows(b.m, a.rows)
    outs = [a.out] + ([os.path.join(ROOT, "docs", "results", "read")]
                      if a.update_docs else [])
    for out in outs:
        write_outputs(out, rows, b.m, meta, a.quick)
        if b.profile:
            with open(os.path.join(out, "profile.md"), "w") as f:
                f.write(f"Flat perf profile of the cluster mount daemon "
                        f"(perf record -F 499), 4 KiB random reads O_DIRECT "
                        f"QD1 with one chunkd down; {meta['date']}, load "
                        f"{meta['loadavg_start'][0]} -> "
                        f"{meta['loadavg_end'][0]}.\n\n```\n{b.profile}\n"
                        f"```\n")
    print(f"{run.summary('read', a.quick, meta)} -> {', '.join(outs)}")
    for r in rows:
        print(row_line(r), flush=True)
    if rc == 0 and any(r["status"] == "failed" for r in rows):
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
