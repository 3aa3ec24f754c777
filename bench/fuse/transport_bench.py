#!/usr/bin/python3
"""stripefs FUSE transport benchmark: /dev/fuse vs io-uring on one volume.

In one run: creates an embedded stripefs volume, pre-writes the test file,
then for each repetition mounts the volume with --transport=dev and with
--transport=uring (io-uring needs /sys/module/fuse/parameters/enable_uring=Y:
set here and restored to its old value at the end, also on failure or
SIGINT/SIGTERM), drops the page cache before every read job and runs the fio
matrix: 4 KiB random read O_DIRECT at iodepth 1/4/8 x numjobs 1/2, 1 MiB
sequential read and 1 MiB sequential write (O_DIRECT).  The same jobs run on
libfuse 3.14's passthrough_ll example over a tmpfs directory and on that
tmpfs directly (reference rows).  Targets are interleaved in every
repetition (rotated order) and medians over the repetitions are reported,
with uring/dev ratios.

Per job it records IOPS, MiB/s, mean/p99 latency, the CPU seconds of the FUSE
daemon (and per FUSE request, from the `stripefs stat --json` queue
counters), the machine's CPU busy fraction and load average.

Outputs (under --out, default a fresh transport-YYYYmmdd-HHMMSS directory
under the current one): results.json, results.csv (one line per run),
results.md (median table).  The committed tables in docs/results/transport/
are rewritten only with --update-docs.  Usually started as
`stripefs bench transport [args]`.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lib import fio, knobs, passthrough, run, sampling  # noqa: E402
from lib.stripefs import Stripefs, require_binary  # noqa: E402

TARGETS = ["stripefs-dev", "stripefs-uring", "fuse-ll", "tmpfs"]
# The committed tables (rewritten only with --update-docs).
DOCS_OUT = os.path.join(ROOT, "docs", "results", "transport")


def job_matrix(quick, size_mib, runtime, ramp, ioengine, only=()):
    """[(name, kind, unit, fio args)]; kind read|write, unit iops|mib_s."""
    base = [f"--size={size_mib}M", "--time_based", f"--runtime={runtime}",
            f"--ramp_time={ramp}", "--direct=1", f"--ioengine={ioengine}",
            "--group_reporting"]
    jobs = []
    for nj in (1, 2):
        for qd in (1, 4, 8):
            jobs.append((f"randread-4K-qd{qd}-j{nj}", "read", "iops",
                         base + ["--rw=randread", "--bs=4K",
                                 f"--iodepth={qd}", f"--numjobs={nj}",
                                 "--filename=readfile"]))
    jobs.append(("seqread-1M-qd4", "read", "mib_s",
                 base + ["--rw=read", "--bs=1M", "--iodepth=4",
                         "--filename=readfile"]))
    jobs.append(("seqwrite-1M-qd4", "write", "mib_s",
                 base + ["--rw=write", "--bs=1M", "--iodepth=4",
                         "--filename=writefile"]))
    if quick:
        keep = {"randread-4K-qd1-j1", "randread-4K-qd4-j2", "seqread-1M-qd4",
                "seqwrite-1M-qd4"}
        jobs = [j for j in jobs if j[0] in keep]
    if only:
        jobs = [j for j in jobs if j[0] in only]
    return jobs


def job_names():
    return [j[0] for j in job_matrix(False, 1, 1, 0, "io_uring")]


class TransportBench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="stripefs-tbench-",
                                     dir=args.workdir)
        self.vol = os.path.join(self.work, "vol")
        self.mnt = os.path.join(self.work, "mnt")
        self.tmpfs = os.path.join(self.work, "tmpfs")
        self.pt_mnt = os.path.join(self.work, "ptll")
        for d in (self.mnt, self.tmpfs, self.pt_mnt):
            os.makedirs(d)
        self.tmpfs_mounted = False
        self.sf_mounted = False
        self.pt = None  # the passthrough_ll mount while it runs
        self.daemon_pid = None
        self.rows = []
        self.mounts = []  # what each mount reported
        self.notes = []
        self.t0 = time.time()
        self.log = run.Log(self.t0)
        self.stripefs = Stripefs(args.stripefs)
        self.uring = knobs.Knob(knobs.URING, self.log)

    def sf(self, *argv, check=True, timeout=120):
        return self.stripefs.run(*argv, check=check, timeout=timeout)

    # ------------------------------------------------------------ mounts
    def mount_stripefs(self, transport):
        if transport == "uring" and not self.uring.set("Y"):
            raise RuntimeError("this kernel has no " + knobs.URING)
        for attempt in range(2):
            extra = ([f"--uring-try-reads={self.args.uring_try_reads}"]
                     if transport == "uring" else [])
            self.daemon_pid, banner = self.stripefs.mount(
                self.vol, self.mnt, f"--transport={transport}",
                f"--dev-threads={self.args.dev_threads}", *extra)
            self.sf_mounted = True
            st = self.stat()
            got = st.get("negotiated", {}).get("transport")
            if got == transport:
                break
            # Someone else may have reset the knob between our write and the
            # mount's INIT; try once more, then give up loudly.
            self.umount_stripefs()
            if transport == "uring":
                self.uring.set("Y")
            if attempt == 1:
                raise RuntimeError(f"mounted with --transport={transport} but "
                                   f"`stripefs stat` reports {got!r}")
        self.mounts.append({"transport": transport, "stat_transport": got,
                            "banner": banner,
                            "queues": [f"{q.get('transport')}/{q.get('queue')}"
                                       for q in st.get("queues", [])]})
        return got

    def umount_stripefs(self):
        if not self.sf_mounted:
            return
        self.stripefs.umount(self.mnt)
        self.sf_mounted = False
        self.daemon_pid = None

    def stat(self):
        if not self.sf_mounted:
            return {}
        return self.stripefs.stat(self.mnt)

    def queue_requests(self):
        """{queue name: requests} of the mounted stripefs daemon."""
        st = self.stat()
        qs = st.get("queues") or []
        return {f"{q.get('transport')}/{q.get('queue')}": q.get("requests", 0)
                for q in qs}

    def start_passthrough(self):
        self.pt = passthrough.Passthrough(self.pt_exe, self.tmpfs,
                                          self.pt_mnt).start()
        self.daemon_pid = self.pt.pid

    def stop_passthrough(self):
        if self.pt is None:
            return
        self.pt.stop()
        self.pt = None
        self.daemon_pid = None

    def teardown(self):
        try:
            self.umount_stripefs()
        finally:
            try:
                self.stop_passthrough()
            finally:
                try:
                    if self.tmpfs_mounted:
                        subprocess.run(["umount", self.tmpfs], check=False)
                        self.tmpfs_mounted = False
                finally:
                    self.uring.restore()
                    run.remove_work(self.work, self.log)

    # --------------------------------------------------------------- fio
    def fio(self, directory, name, fioargs):
        return fio.run(directory, name, fioargs,
                       timeout=self.args.runtime * 10 + 180)

    def prewrite(self, directory):
        path = os.path.join(directory, "readfile")
        want = self.args.size * 1048576
        if os.path.exists(path) and os.path.getsize(path) >= want:
            return
        t = time.time()
        self.fio(directory, "prewrite", [
            "--rw=write", "--bs=1M", f"--size={self.args.size}M",
            "--end_fsync=1", "--filename=readfile", "--ioengine=psync"])
        self.log(f"pre-wrote {self.args.size} MiB readfile in {directory} "
                 f"({time.time() - t:.1f} s)")

    def run_job(self, target, rep, directory, job):
        name, kind, unit, fioargs = job
        if kind == "read":
            knobs.drop_caches(self.log)
        pid = self.daemon_pid
        q0 = self.queue_requests() if target.startswith("stripefs") else {}
        meter = sampling.CpuMeter({"daemon": pid} if pid else {}).start()
        host0 = sampling.cpu_times()
        la = sampling.loadavg()
        res = self.fio(directory, name, fioargs)
        host1 = sampling.cpu_times()
        daemon_cpu = meter.stop().get("daemon")
        q1 = self.queue_requests() if target.startswith("stripefs") else {}
        row = {"target": target, "rep": rep, "job": name, "kind": kind,
               "unit": unit}
        row.update(fio.summarize(res, kind))
        row.update({
            "loadavg_1m": la[0],
            "host_cpu_busy_pct": sampling.busy_pct(host0, host1),
            "daemon_cpu_s": daemon_cpu,
        })
        dq = {k: v - q0.get(k, 0) for k, v in q1.items()}
        row["queue_requests"] = {k: v for k, v in dq.items() if v}
        reqs = sum(dq.values())
        row["fuse_requests"] = reqs if q1 else None
        # The daemon's CPU includes the ramp time; so does the request count.
        row["daemon_cpu_us_per_request"] = (
            round(1e6 * row["daemon_cpu_s"] / reqs, 1)
            if reqs and row["daemon_cpu_s"] is not None else None)
        self.rows.append(row)
        val = (f"{row['iops']:9.0f} IOPS" if unit == "iops"
               else f"{row['mib_s']:8.1f} MiB/s")
        extra = ""
        if row["daemon_cpu_us_per_request"] is not None:
            extra = f", daemon {row['daemon_cpu_us_per_request']} us/req"
        self.log(f"rep {rep} {target:15s} {name:20s} {val} mean "
                 f"{row['lat_mean_us']:8.1f} us (load {la[0]:.1f}, host busy "
                 f"{row['host_cpu_busy_pct']} %{extra})")
        return row

    def run_target(self, target, rep, jobs):
        """Mounts `target` (tmpfs is always there), runs the jobs, unmounts.
        Each write job's file is removed after it."""
        if target in ("stripefs-dev", "stripefs-uring"):
            directory, stop = self.mnt, self.umount_stripefs
            self.mount_stripefs(target.split("-")[1])
        elif target == "fuse-ll":
            directory, stop = self.pt_mnt, self.stop_passthrough
            self.start_passthrough()
        else:
            directory, stop = self.tmpfs, (lambda: None)
        try:
            for job in jobs:
                self.run_job(target, rep, directory, job)
                if job[1] == "write":
                    os.unlink(os.path.join(directory, "writefile"))
        finally:
            stop()

    def run(self):
        a = self.args
        jobs = job_matrix(a.quick, a.size, a.runtime, a.ramp, a.ioengine,
                          a.jobs)
        targets = list(a.targets)
        if "stripefs-uring" in targets and not self.uring.exists():
            self.notes.append("no io-uring rows: this kernel has no "
                              + knobs.URING)
            self.log(self.notes[-1])
            targets.remove("stripefs-uring")
        if "fuse-ll" in targets:
            self.pt_exe = passthrough.build(self.work, self.log)
            if not self.pt_exe:
                targets.remove("fuse-ll")
        if "fuse-ll" in targets or "tmpfs" in targets:
            subprocess.run(["mount", "-t", "tmpfs", "-o",
                            f"size={a.size * 2 + 64}m", "tmpfs", self.tmpfs],
                           check=True)
            self.tmpfs_mounted = True
            self.prewrite(self.tmpfs)
        # The volume: created by the first mount, the test file written once.
        if any(t.startswith("stripefs") for t in targets):
            self.sf("mkfs", self.vol, "--k", str(a.k), "--m", str(a.m),
                    "--cell-size", a.cell_size)
            self.mount_stripefs("dev")
            try:
                self.prewrite(self.mnt)
            finally:
                self.umount_stripefs()
        for rep in range(a.reps):
            order = targets[rep % len(targets):] + targets[:rep %
                                                           len(targets)]
            self.log(f"repetition {rep + 1}/{a.reps}: {' -> '.join(order)}")
            for t in order:
                self.run_target(t, rep, jobs)
        self.targets_run = targets
        self.jobs = jobs


# ------------------------------------------------------------------ outputs
def median_table(rows, jobs, targets):
    """{job: {target: {value, min, max, n, cpu_us_per_req, lat_mean_us}}}."""
    out = {}
    for name, _, unit, _ in jobs:
        out[name] = {}
        for t in targets:
            rs = [r for r in rows if r["job"] == name and r["target"] == t]
            if not rs:
                continue
            vals = [r[unit] for r in rs]
            cpu = [r["daemon_cpu_us_per_request"] for r in rs
                   if r["daemon_cpu_us_per_request"] is not None]
            out[name][t] = {
                "unit": unit, "median": statistics.median(vals),
                "min": min(vals), "max": max(vals), "n": len(vals),
                "lat_mean_us": statistics.median(r["lat_mean_us"]
                                                 for r in rs),
                "lat_p99_us": statistics.median(r["lat_p99_us"] or 0
                                                for r in rs),
                "daemon_cpu_us_per_request": (statistics.median(cpu)
                                              if cpu else None),
                "host_cpu_busy_pct": statistics.median(r["host_cpu_busy_pct"]
                                                       for r in rs),
            }
        dev = out[name].get("stripefs-dev")
        ur = out[name].get("stripefs-uring")
        if dev and ur and dev["median"] > 0:
            # Ratio of medians plus the per-repetition ratios (paired runs).
            pairs = []
            for rep in sorted({r["rep"] for r in rows}):
                d = [r[unit] for r in rows if r["job"] == name and
                     r["target"] == "stripefs-dev" and r["rep"] == rep]
                u = [r[unit] for r in rows if r["job"] == name and
                     r["target"] == "stripefs-uring" and r["rep"] == rep]
                if d and u and d[0] > 0:
                    pairs.append(u[0] / d[0])
            out[name]["ratio"] = {
                "of_medians": ur["median"] / dev["median"],
                "per_rep": pairs,
                "median_of_pairs": statistics.median(pairs) if pairs else None}
    return out


def fmtv(x, unit):
    if x is None:
        return "-"
    if unit == "iops":
        return f"{x:,.0f}"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def write_outputs(b, out, meta):
    os.makedirs(out, exist_ok=True)
    table = median_table(b.rows, b.jobs, b.targets_run)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "medians": table, "mounts": b.mounts,
                   "rows": b.rows}, f, indent=1)
    cols = ["target", "rep", "job", "iops", "mib_s", "lat_mean_us",
            "lat_p99_us", "daemon_cpu_s", "fuse_requests",
            "daemon_cpu_us_per_request", "fio_usr_pct", "fio_sys_pct",
            "host_cpu_busy_pct", "loadavg_1m"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in b.rows:
            w.writerow(r)
    shown = [t for t in TARGETS if t in b.targets_run]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"stripefs FUSE transport bench, {meta['date']}, kernel "
                f"{meta['kernel']}, {meta['cpus']} CPUs; embedded volume "
                f"{meta['k']}+{meta['m']} cell {meta['cell_size']}, "
                f"{meta['size_mib']} MiB file, {meta['runtime_s']} s per job "
                f"(+{meta['ramp_s']} s ramp), {meta['reps']} interleaved "
                f"repetitions, fio ioengine {meta['ioengine']}, O_DIRECT"
                f"{' (quick)' if meta['quick'] else ''}.\n"
                f"Load average (1/5/15 min) at start "
                f"{'/'.join(str(x) for x in meta['loadavg_start'])}, at end "
                f"{'/'.join(str(x) for x in meta.get('loadavg_end', []))}.\n\n")
        f.write("Median over the repetitions (min-max); 4K jobs in IOPS, "
                "1M jobs in MiB/s. uring/dev = ratio of the medians "
                "(in brackets: the per-repetition paired ratios).\n\n")
        f.write("| job | unit | " + " | ".join(shown) +
                " | uring/dev |\n")
        f.write("|---|---|" + "---|" * len(shown) + "---|\n")
        for name, _, unit, _ in b.jobs:
            cells = []
            for t in shown:
                c = table[name].get(t)
                cells.append("-" if not c else
                             f"{fmtv(c['median'], unit)} "
                             f"({fmtv(c['min'], unit)}-{fmtv(c['max'], unit)})")
            rt = table[name].get("ratio")
            ratio = "-" if not rt else (
                f"**{rt['of_medians']:.2f}** ["
                + " ".join(f"{x:.2f}" for x in rt["per_rep"]) + "]")
            f.write(f"| {name} | {'IOPS' if unit == 'iops' else 'MiB/s'} | "
                    + " | ".join(cells) + f" | {ratio} |\n")
        f.write("\nMean latency (us, median) and FUSE daemon CPU per request "
                "(us, median; daemon utime+stime over the job incl. ramp / "
                "FUSE requests counted by `stripefs stat`):\n\n")
        lat_t = list(shown)
        cpu_t = [t for t in shown if t.startswith("stripefs")]
        hdr = (["job"] + [f"{t} lat" for t in lat_t] +
               [f"{t} CPU/req" for t in cpu_t] +
               ["host CPU busy % (dev/uring)"])
        f.write("| " + " | ".join(hdr) + " |\n")
        f.write("|" + "---|" * len(hdr) + "\n")
        for name, _, unit, _ in b.jobs:
            row = [name]
            for t in lat_t:
                c = table[name].get(t)
                row.append(f"{c['lat_mean_us']:.0f}" if c else "-")
            for t in shown:
                if t.startswith("stripefs"):
                    c = table[name].get(t)
                    v = c and c["daemon_cpu_us_per_request"]
                    row.append(f"{v:.0f}" if v else "-")
            busy = [table[name].get(t, {}).get("host_cpu_busy_pct")
                    for t in ("stripefs-dev", "stripefs-uring")]
            row.append("/".join("-" if x is None else f"{x:.0f}"
                                for x in busy))
            f.write("| " + " | ".join(row) + " |\n")
        if b.mounts:
            f.write("\nMounts (what `stripefs stat` reported): " +
                    "; ".join(sorted({f"--transport={m['transport']} -> "
                                      f"{m['stat_transport']}"
                                      + f" (queues {' '.join(m['queues'])})"
                                      for m in b.mounts})) + ".\n")
        for n in b.notes:
            f.write(f"\nNote: {n}\n")
    return table


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=None,
                   help="interleaved repetitions (default 3; quick 1)")
    p.add_argument("--size", type=int, default=None,
                   help="test file MiB (default 256; quick 16)")
    p.add_argument("--runtime", type=int, default=None,
                   help="s per job (default 5; quick 1)")
    p.add_argument("--ramp", type=int, default=None,
                   help="fio ramp_time s, not counted (default 1; quick 0)")
    p.add_argument("--ioengine", default="io_uring",
                   help="fio engine (io_uring or libaio)")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--cell-size", default="256K")
    p.add_argument("--dev-threads", type=int, default=4,
                   help="stripefs mount --dev-threads (default 4)")
    p.add_argument("--uring-try-reads", choices=["on", "off"], default="on",
                   help="stripefs mount --uring-try-reads for the uring "
                        "target (default on: READs tried on the queue "
                        "thread first)")
    p.add_argument("--targets", default=",".join(TARGETS),
                   help="comma list of " + ",".join(TARGETS))
    p.add_argument("--quick", action="store_true",
                   help="tiny matrix, one repetition (smoke test)")
    p.add_argument("--workdir", default="/var/tmp",
                   help="where the volume's work dir is created "
                        "(default /var/tmp: a disk, not tmpfs)")
    p.add_argument("--jobs", default="",
                   help="comma list of jobs to run (default all): "
                        + ",".join(job_names()))
    p.add_argument("--out", default=None,
                   help="result directory (default: a fresh "
                        "transport-YYYYmmdd-HHMMSS under the current one)")
    p.add_argument("--update-docs", action="store_true",
                   help="also rewrite the committed tables in " + DOCS_OUT)
    p.add_argument("--stripefs", default=os.environ.get("STRIPEFS_BIN"))
    a = p.parse_args()
    a.reps = a.reps or (1 if a.quick else 3)
    a.size = a.size or (16 if a.quick else 256)
    a.runtime = a.runtime or (1 if a.quick else 5)
    if a.ramp is None:
        a.ramp = 0 if a.quick else 1
    a.targets = [t for t in a.targets.split(",") if t]
    a.jobs = [j for j in a.jobs.split(",") if j]
    bad = [j for j in a.jobs if j not in job_names()]
    if bad:
        sys.exit(f"transport_bench: unknown job(s) {bad}; use {job_names()}")
    if a.out is None:
        a.out = run.fresh_out("transport", "transport_bench")
    bad = [t for t in a.targets if t not in TARGETS]
    if bad:
        sys.exit(f"transport_bench: unknown target(s) {bad}; use {TARGETS}")
    a.stripefs = require_binary("transport_bench", a.stripefs)
    run.require_mount_host("transport_bench",
                           "mount, drop_caches, enable_uring")

    run.raise_on_signals()

    b = TransportBench(a)
    meta = run.host_meta()
    meta.update({"k": a.k, "m": a.m, "cell_size": a.cell_size,
                 "size_mib": a.size, "runtime_s": a.runtime,
                 "ramp_s": a.ramp, "reps": a.reps, "ioengine": a.ioengine,
                 "dev_threads": a.dev_threads,
                 "uring_try_reads": a.uring_try_reads, "quick": a.quick,
                 "enable_uring_before": knobs.read(knobs.URING)})
    rc = run.guarded(b.run, b.teardown, b.log)
    meta["loadavg_end"] = sampling.loadavg()
    meta["enable_uring_after"] = knobs.read(knobs.URING)
    meta["complete"] = rc == 0
    meta["wall_s"] = round(time.time() - b.t0, 1)
    if b.rows:
        if not hasattr(b, "jobs"):
            b.jobs = job_matrix(a.quick, a.size, a.runtime, a.ramp,
                                a.ioengine, a.jobs)
            b.targets_run = sorted({r["target"] for r in b.rows},
                                   key=TARGETS.index)
        table = write_outputs(b, a.out, meta)
        if a.update_docs:
            write_outputs(b, DOCS_OUT, meta)
            print(f"committed tables rewritten: {DOCS_OUT}")
        print(f"\nsummary ({len(b.rows)} runs, {meta['wall_s']:.0f} s, load "
              f"{meta['loadavg_start'][0]} -> {meta['loadavg_end'][0]}) -> "
              f"{a.out}")
        for name, _, unit, _ in b.jobs:
            cells = [f"{t}={fmtv(table[name][t]['median'], unit)}"
                     for t in TARGETS if t in table[name]]
            rt = table[name].get("ratio")
            print(f"  {name:20s} {' '.join(cells)} ratio="
                  + (f"{rt['of_medians']:.2f}" if rt else "-")
                  + " (uring/dev)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
