#!/usr/bin/python3
"""stripefs cluster benchmark: fio through a mounted volume on a local cluster.

Brings up a loopback cluster (`stripefs cluster up`), mounts it, and runs a
fio job matrix in three phases: healthy, degraded (one chunkd killed with
SIGKILL) and repair (the server restarted, `stripefs repair` rebuilding its
missing chunks while a foreground fio job runs).  A tmpfs reference row set
runs the same jobs without FUSE.  Per job it records MiB/s, IOPS, mean and p99
latency, CPU seconds of the mount daemon / metad / chunkd processes, their peak
RSS (VmHWM) and the deltas of the `stripefs stat --json` backend counters.
The closing summary prints the load average and, per row, `ratio=` (MiB/s
over the same job's reference row of the run: passthrough_ll, else tmpfs).

Outputs (under --out, default a fresh cluster-bench-YYYYmmdd-HHMMSS directory
under the current one; --sweep writes to OUT/sweep/): results.json,
results.csv, results.md, throughput.png.  The committed tables in
docs/results/cluster/ are rewritten only with --update-docs (which replaces
--out).  The cluster and mount are always torn down (finally block, also on
Ctrl-C and SIGTERM).  Usually started as `stripefs bench cluster [args]`.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lib import fio, knobs, passthrough, plots, run, sampling  # noqa: E402
from lib.stripefs import Cluster, Stripefs, require_binary  # noqa: E402

# The committed tables (rewritten only with --update-docs).
DOCS_OUT = os.path.join(ROOT, "docs", "results", "cluster")


# ---------------------------------------------------------------- job matrix
def job_matrix(quick, size_mib, runtime):
    """Returns [(name, kind, fio-args)]; kind is 'read' or 'write'."""
    sz = f"{size_mib}M"
    rt = str(runtime)
    seqw = ["--rw=write", f"--size={sz}", f"--runtime={rt}"]
    timed = ["--time_based", f"--runtime={rt}", f"--size={sz}"]
    jobs = [
        ("seqwrite-1M-buffered", "write",
         seqw + ["--bs=1M", "--end_fsync=1", "--filename=seqw1m"]),
        ("seqwrite-256K-buffered", "write",
         seqw + ["--bs=256K", "--end_fsync=1", "--filename=seqw256k"]),
        ("seqwrite-4K-buffered", "write",
         seqw + ["--bs=4K", "--end_fsync=1", "--filename=seqw4k"]),
        ("seqwrite-1M-direct", "write",
         seqw + ["--bs=1M", "--direct=1", "--filename=seqw1md"]),
        ("seqread-1M-direct", "read",
         timed + ["--rw=read", "--bs=1M", "--direct=1", "--filename=readfile"]),
        ("seqread-1M-buffered", "read",
         timed + ["--rw=read", "--bs=1M", "--filename=readfile"]),
        ("randread-4K-direct-qd1", "read",
         timed + ["--rw=randread", "--bs=4K", "--direct=1", "--iodepth=1",
                  "--filename=readfile", "--ioengine=IOENGINE"]),
        ("randread-4K-direct-qd8", "read",
         timed + ["--rw=randread", "--bs=4K", "--direct=1", "--iodepth=8",
                  "--filename=readfile", "--ioengine=IOENGINE"]),
        ("randread-4K-psync-8jobs", "read",
         timed + ["--rw=randread", "--bs=4K", "--numjobs=8",
                  "--group_reporting", "--filename=readfile",
                  "--ioengine=psync"]),
        ("randwrite-4K", "write",
         timed + ["--rw=randwrite", "--bs=4K", "--end_fsync=1",
                  "--filename=randw"]),
    ]
    if quick:
        keep = {"seqwrite-1M-buffered", "seqread-1M-direct",
                "randread-4K-direct-qd1"}
        jobs = [j for j in jobs if j[0] in keep]
    return jobs


# ------------------------------------------------------------------ helpers
def netns_args(a):
    """`cluster up` arguments of --netns / --link-rate / --netem."""
    if not a.netns:
        return []
    out = ["--netns"]
    if a.link_rate:
        out += ["--link-rate", a.link_rate]
    if a.netem:
        out += ["--netem", a.netem]
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows = []
        self.work = tempfile.mkdtemp(prefix="stripefs-bench-")
        self.cdir = os.path.join(self.work, "cluster")
        self.mnt = os.path.join(self.work, "mnt")
        self.tmpfs = None
        os.makedirs(self.mnt)
        self.mounted = False
        self.daemon_pid = None
        self.repair = {}
        self.t0 = time.time()
        self.log = run.Log(self.t0)
        self.stripefs = Stripefs(args.stripefs)
        self.cluster = Cluster(self.stripefs, self.cdir)
        self.uring = knobs.Knob(knobs.URING, self.log)
        self.pt = None  # the passthrough_ll reference mount
        self.uring_note = None

    def sf(self, *argv, check=True, timeout=120):
        return self.stripefs.run(*argv, check=check, timeout=timeout)

    # cluster + mount
    def up(self):
        a = self.args
        self.cluster.up(a.servers, a.k, a.m, a.cell_size, netns_args(a))
        self.meta, self.key = self.cluster.meta, self.cluster.key
        self.daemon_pid, self.mount_banner = self.stripefs.mount(
            *self.cluster.mount_args(), self.mnt,
            f"--transport={a.transport}", f"--coalesce={a.coalesce}")
        self.mounted = True
        self.main_transport = self.stripefs.stat(self.mnt).get(
            "negotiated", {}).get("transport")
        self.log(f"cluster up: {a.servers} servers {a.k}+{a.m} cell "
                 f"{a.cell_size}, mounted at {self.mnt} "
                 f"(daemon pid {self.daemon_pid})")

    def mount_transport(self, transport):
        """Unmounts and mounts the volume again over `transport`; returns
        the transport `stripefs stat` reports.  For uring, enable_uring is
        set first (restored in down())."""
        a = self.args
        if self.mounted:
            self.stripefs.umount(self.mnt)
            self.mounted = False
        if transport == "uring":
            self.uring.set("Y")
        self.daemon_pid, _ = self.stripefs.mount(
            *self.cluster.mount_args(), self.mnt,
            f"--transport={transport}", f"--coalesce={a.coalesce}")
        self.mounted = True
        got = self.stripefs.stat(self.mnt).get("negotiated", {}).get(
            "transport")
        self.log(f"mounted over --transport={transport}: stat says {got} "
                 f"(daemon pid {self.daemon_pid})")
        return got

    def down(self):
        if self.mounted:
            self.stripefs.umount(self.mnt)
            self.mounted = False
        self.cluster.down()
        self.stop_passthrough()
        if self.tmpfs:
            subprocess.run(["umount", self.tmpfs], check=False)
            self.tmpfs = None
        self.uring.restore()
        run.remove_work(self.work, self.log)

    # process accounting
    def procs(self):
        """name -> pid of the mount daemon, metad and chunkd processes."""
        out = {"fuse-daemon": self.daemon_pid} if self.daemon_pid else {}
        out.update(self.cluster.pids())
        return out

    def counters(self):
        if not self.mounted:
            return {}
        return self.stripefs.stat(self.mnt).get("backend", {})

    # fio
    def fio(self, directory, name, fioargs, extra_timeout=120):
        argv = [x.replace("IOENGINE", self.args.ioengine) for x in fioargs]
        return fio.run(directory, name, argv,
                       self.fio_timeout(fioargs, extra_timeout))

    def fio_timeout(self, fioargs, extra):
        """Seconds before a fio job is given up.  Jobs with end_fsync can
        spend minutes writing back buffered data (degraded 4 KiB random
        writes are read-modify-writes of whole stripes: under load ~12 on
        2 cores one took > 156 s), so they get --fsync-timeout on top."""
        t = self.args.runtime * 6 + extra
        if "--end_fsync=1" in fioargs:
            t += self.args.fsync_timeout
        return t

    def drop_caches(self):
        knobs.drop_caches(self.log)

    def prepare_readfile(self, directory):
        path = os.path.join(directory, "readfile")
        want = self.args.size * 1048576
        if os.path.exists(path) and os.path.getsize(path) >= want:
            return
        self.fio(directory, "layout", ["--rw=write", "--bs=1M",
                                       f"--size={self.args.size}M",
                                       "--end_fsync=1",
                                       "--filename=readfile"])

    def run_job(self, target, phase, directory, name, kind, fioargs,
                with_procs=True):
        if kind == "read":
            self.prepare_readfile(directory)
            self.drop_caches()
        procs = self.procs() if with_procs else {}
        meter = sampling.CpuMeter(procs).start()
        c0 = self.counters() if with_procs else {}
        t = time.time()
        res = self.fio(directory, name, fioargs)
        wall = time.time() - t
        row = {"target": target, "phase": phase, "job": name, "kind": kind,
               "wall_s": wall}
        row.update(fio.summarize(res, kind))
        cpu = meter.stop()
        row["cpu_s"] = cpu
        row["cpu_fuse_daemon_s"] = cpu.get("fuse-daemon")
        row["cpu_servers_s"] = round(sum(v for n, v in cpu.items()
                                         if n.startswith("chunkd")), 3) \
            if cpu else None
        rss = {n: sampling.peak_rss_kib(p) for n, p in procs.items()}
        row["peak_rss_kib"] = rss
        row["peak_rss_fuse_daemon_mib"] = (rss["fuse-daemon"] / 1024.0
                                           if rss.get("fuse-daemon") else None)
        c1 = self.counters() if with_procs else {}
        row["counters"] = {k: v - c0.get(k, 0) for k, v in c1.items()
                           if isinstance(v, (int, float))
                           and k != "full_stripe_pct"}
        self.rows.append(row)
        self.log(f"{target:14s} {phase:9s} {name:26s} "
                 f"{row['mib_s']:8.1f} MiB/s {row['iops']:9.0f} IOPS "
                 f"mean {row['lat_mean_us']:9.1f} us p99 "
                 f"{(row['lat_p99_us'] or 0):9.1f} us")
        return row

    # phases
    def run_reference(self, target, directory, jobs):
        for name, kind, fioargs in jobs:
            if "direct" in name:
                # tmpfs (the backing store of both reference rows) is run
                # buffered: O_DIRECT on tmpfs is not supported on every kernel.
                fioargs = [a for a in fioargs if a != "--direct=1"]
            self.run_job(target, "reference", directory, name, kind,
                         fioargs, with_procs=target != "tmpfs")
            if kind == "write":  # keep the tmpfs small (unlink via the mount)
                for fn in os.listdir(directory):
                    if fn != "readfile":
                        os.unlink(os.path.join(directory, fn))

    def reference_tmpfs(self, jobs):
        self.tmpfs = os.path.join(self.work, "tmpfs")
        os.makedirs(self.tmpfs)
        subprocess.run(["mount", "-t", "tmpfs", "-o",
                        f"size={self.args.size * 6 + 64}m", "tmpfs",
                        self.tmpfs], check=True)
        self.run_reference("tmpfs", self.tmpfs, jobs)
        exe = (None if self.args.no_passthrough
               else passthrough.build(self.work, self.log))
        if exe:
            self.pt = passthrough.Passthrough(
                exe, self.tmpfs, os.path.join(self.work, "ptll")).start()
            self.daemon_pid = self.pt.pid
            self.run_reference("fuse-ll", self.pt.mnt, jobs)
            self.daemon_pid = None
            self.stop_passthrough()
        subprocess.run(["umount", self.tmpfs], check=False)
        self.tmpfs = None

    def stop_passthrough(self):
        if self.pt is not None:
            self.pt.stop()
            self.pt = None

    def phase(self, phase, jobs, target="stripefs"):
        for name, kind, fioargs in jobs:
            self.run_job(target, phase, self.mnt, name, kind, fioargs)

    def uring_rows(self, jobs):
        """The healthy matrix again on a mount over FUSE-over-io-uring
        (target stripefs-uring), then back to the first transport."""
        a = self.args
        if a.uring == "off" or a.transport == "uring":
            return
        if not self.uring.exists():
            self.uring_note = ("no io-uring rows: the kernel has no " +
                               knobs.URING)
            self.log(self.uring_note)
            return
        try:
            got = self.mount_transport("uring")
            if got != "uring":
                self.uring_note = (f"no io-uring rows: a --transport=uring "
                                   f"mount reported {got!r}")
                self.log(self.uring_note)
                return
            self.phase("healthy", jobs, target="stripefs-uring")
        finally:
            self.uring.restore()
            self.mount_transport(a.transport)

    def repair_phase(self, fg_job):
        victim = str(self.args.victim)
        if self.args.repair_mode == "out":
            self.sf("server-state", "--meta", self.meta, "--key", self.key,
                    "--id", victim, "--state", "out")
            mode = ("server marked out (stays down); all its chunks are "
                    "rebuilt on the other servers")
            self.log(f"server {victim} marked out; running stripefs repair "
                     f"with a foreground {fg_job[0]} job")
        else:
            self.sf("cluster", "start", "--dir", self.cdir, "--server", victim)
            mode = ("server restarted (not marked out); missing chunks "
                    "written while it was down are rebuilt")
            self.log(f"server {victim} restarted; running stripefs repair "
                     f"with a foreground {fg_job[0]} job")
        t = time.time()
        rep = subprocess.Popen([self.args.stripefs, "repair", "--meta",
                                self.meta, "--key", self.key],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        try:
            row = self.run_job("stripefs", "repair", self.mnt, *fg_job)
            out, err = rep.communicate(timeout=600)
        finally:
            if rep.poll() is None:
                rep.kill()
                rep.wait()
        seconds = time.time() - t
        m = re.search(r"\(([\d.]+) MiB/s\)", out)
        mb = re.search(r"chunks \(([\d.]+) MiB\) rebuilt in ([\d.]+) s", out)
        self.repair = {
            "mode": mode,
            "exit_code": rep.returncode,
            "wall_s_incl_foreground": round(seconds, 2),
            "rebuilt_mib": float(mb.group(1)) if mb else None,
            "repair_s": float(mb.group(2)) if mb else None,
            "rebuild_mib_s": float(m.group(1)) if m else None,
            "output": out.strip(),
            "stderr": err.strip()[-500:],
            "foreground_job": fg_job[0],
            "foreground_mib_s": row["mib_s"],
        }
        self.log(f"repair: exit {rep.returncode}: {out.strip()}")

    def run(self):
        a = self.args
        jobs = job_matrix(a.quick, a.size, a.runtime)
        if not a.no_reference:
            self.reference_tmpfs(jobs if not a.quick else jobs[:1])
        self.up()
        self.phase("healthy", jobs)
        self.uring_rows(jobs)
        self.sf("cluster", "kill", "--dir", self.cdir, "--server",
                str(a.victim), "--signal", "9")
        self.log(f"killed chunkd {a.victim} with SIGKILL")
        time.sleep(1)
        deg = jobs if not a.quick else [j for j in jobs
                                        if j[0] == "seqread-1M-direct"]
        self.phase("degraded", deg)
        # Write new data while degraded so repair has chunks to rebuild.
        if a.quick:
            self.run_job("stripefs", "degraded", self.mnt,
                         "seqwrite-1M-buffered",
                         "write", ["--rw=write", f"--size={a.size}M",
                                   f"--runtime={a.runtime}", "--bs=1M",
                                   "--end_fsync=1", "--filename=degw"])
        fg = [j for j in jobs if j[0] == "seqread-1M-direct"][0]
        self.repair_phase(fg)


# ------------------------------------------------------------------ outputs
COLS = ["target", "phase", "job", "mib_s", "iops", "lat_mean_us",
        "lat_p99_us", "cpu_fuse_daemon_s", "cpu_servers_s",
        "peak_rss_fuse_daemon_mib", "full_stripe_writes", "rmw_stripes",
        "degraded_reads", "degraded_writes", "ratio", "ratio_vs"]

# Reference of a row's ratio= (MiB/s over the same job's reference row of
# the same run), by target: the first of these that ran the job.
REFS = {"stripefs": ["fuse-ll", "tmpfs"],
        "stripefs-uring": ["fuse-ll", "tmpfs"], "fuse-ll": ["tmpfs"]}
REF_NAMES = {"fuse-ll": "passthrough_ll", "tmpfs": "tmpfs"}


def add_ratios(rows):
    """Sets row['ratio'] (MiB/s over the reference's MiB/s) and
    row['ratio_vs'] (passthrough_ll or tmpfs) on every row whose job has a
    reference row in `rows`; None on the others."""
    ref = {(r["target"], r["job"]): r["mib_s"] for r in rows
           if r["phase"] == "reference"}
    for r in rows:
        r["ratio"] = r["ratio_vs"] = None
        for t in REFS.get(r["target"], []):
            v = ref.get((t, r["job"]))
            if v and r.get("mib_s") is not None:
                r["ratio"] = round(r["mib_s"] / v, 3)
                r["ratio_vs"] = REF_NAMES[t]
                break


def ratio_text(r):
    """`ratio=0.41 (vs passthrough_ll)`, or `ratio=-` and why."""
    if r.get("ratio") is not None:
        return f"ratio={r['ratio']:.2f} (vs {r['ratio_vs']})"
    if r["target"] == "tmpfs":
        return "ratio=- (reference)"
    return "ratio=- (no reference row of this job)"


def flat(row):
    c = row.get("counters", {})
    out = {k: row.get(k) for k in COLS}
    for k in ("full_stripe_writes", "rmw_stripes", "degraded_reads",
              "degraded_writes"):
        out[k] = c.get(k)
    return out


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 or v == 0 else f"{v:.2f}"
    return str(v)


def write_outputs(b, out, meta):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "repair": b.repair, "rows": b.rows}, f,
                  indent=1)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        for r in b.rows:
            w.writerow(flat(r))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"stripefs cluster bench, {meta['date']}, {meta['servers']} "
                f"servers {meta['k']}+{meta['m']}, cell {meta['cell_size']}, "
                f"{meta['size_mib']} MiB files, {meta['runtime_s']} s jobs"
                f"{' (quick)' if meta['quick'] else ''}; network: "
                f"{meta.get('network', 'loopback')}\n")
        if meta.get("loadavg_start"):
            f.write(f"Load average (1/5/15 min) at start "
                    f"{'/'.join(str(x) for x in meta['loadavg_start'])}, at "
                    f"end {'/'.join(str(x) for x in meta.get('loadavg_end', []))}"
                    f"; {meta.get('cpus')} CPUs; main mount transport "
                    f"{meta.get('main_transport')}.\n")
        f.write("ratio: MiB/s of the row over MiB/s of the same job's "
                "reference row in this run (ratio_vs: passthrough_ll when it "
                "ran the job, else tmpfs; the references run 'direct' jobs "
                "buffered).\n")
        f.write("\n| " + " | ".join(COLS) + " |\n")
        f.write("|" + "---|" * len(COLS) + "\n")
        for r in b.rows:
            fr = flat(r)
            f.write("| " + " | ".join(fmt(fr[c]) for c in COLS) + " |\n")
        if b.repair:
            rp = b.repair
            f.write(f"\nRepair ({rp['mode']}): exit {rp['exit_code']}, "
                    f"{fmt(rp['rebuilt_mib'])} MiB rebuilt in "
                    f"{fmt(rp['repair_s'])} s ({fmt(rp['rebuild_mib_s'])} "
                    f"MiB/s) while foreground {rp['foreground_job']} ran at "
                    f"{fmt(rp['foreground_mib_s'])} MiB/s.\n")
    if getattr(b, "uring_note", None):
        with open(os.path.join(out, "results.md"), "a") as f:
            f.write(f"\nNote: {b.uring_note}\n")
    try:
        plot_throughput(b.rows, meta, os.path.join(out, "throughput.png"))
        plot_latency(b.rows, meta, os.path.join(out, "latency.png"))
        plot_reference(b.rows, meta, os.path.join(out, "reference.png"))
    except Exception as e:  # plotting is optional; never lose the data
        print(f"warning: plot not written: {e}", file=sys.stderr)


PHASE_COLORS = {"reference": "tab:gray", "healthy": "tab:green",
                "degraded": "tab:orange", "repair": "tab:red"}


def row_label(r):
    return f"{r['target']}/{r['phase']}: {r['job']}"


def plot_throughput(rows, meta, path):
    """MiB/s per job and phase (one bar per row, references in gray)."""
    plt = plots.pyplot()
    labels = [row_label(r) for r in rows]
    colors = [("tab:blue" if r["target"] == "stripefs-uring" else
               PHASE_COLORS.get(r["phase"], "tab:blue")) for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(labels) + 1.5))
    ax.barh(range(len(labels)), [r["mib_s"] for r in rows], color=colors)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("MiB/s (log scale)")
    ax.set_title(f"stripefs cluster bench: {meta['servers']} servers "
                 f"{meta['k']}+{meta['m']} (references gray, io-uring blue)")
    plots.save(fig, path)


def plot_latency(rows, meta, path):
    """Mean and p99 total latency per job (stripefs rows, every phase)."""
    plt = plots.pyplot()
    rs = [r for r in rows if r["target"].startswith("stripefs")]
    if not rs:
        return
    labels = [row_label(r) for r in rs]
    y = list(range(len(rs)))
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rs) + 1.5))
    h = 0.4
    ax.barh([i - h / 2 for i in y], [r["lat_mean_us"] for r in rs], h,
            label="mean", color="tab:blue")
    ax.barh([i + h / 2 for i in y], [r["lat_p99_us"] or 0 for r in rs], h,
            label="p99", color="tab:purple")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("latency per I/O, us (log scale; fio total latency)")
    ax.legend(loc="lower right")
    ax.set_title(f"stripefs latency: {meta['servers']} servers "
                 f"{meta['k']}+{meta['m']}")
    plots.save(fig, path)


def plot_reference(rows, meta, path):
    """Per job: tmpfs, passthrough_ll, stripefs healthy (dev, io-uring)."""
    plt = plots.pyplot()
    series = [("tmpfs", "reference", "tmpfs", "tab:gray"),
              ("fuse-ll", "reference", "passthrough_ll (tmpfs)",
               "tab:brown"),
              ("stripefs", "healthy", "stripefs /dev/fuse", "tab:green"),
              ("stripefs-uring", "healthy", "stripefs io-uring", "tab:blue")]
    series = [s for s in series
              if any(r["target"] == s[0] and r["phase"] == s[1]
                     for r in rows)]
    jobs = []
    for r in rows:
        if r["target"] == "stripefs" and r["phase"] == "healthy" and \
                r["job"] not in jobs:
            jobs.append(r["job"])
    if not jobs or len(series) < 2:
        return
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(jobs) * len(series) / 2
                                    + 2))
    h = 0.8 / len(series)
    for si, (tgt, ph, label, color) in enumerate(series):
        vals = []
        for j in jobs:
            m = [r["mib_s"] for r in rows if r["target"] == tgt and
                 r["phase"] == ph and r["job"] == j]
            vals.append(m[0] if m else 0)
        ax.barh([i + (si - (len(series) - 1) / 2) * h
                 for i in range(len(jobs))], vals, h, label=label,
                color=color)
    ax.set_yticks(range(len(jobs)))
    ax.set_yticklabels(jobs, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("MiB/s (log scale)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("stripefs (healthy) vs reference rows; reference 'direct' "
                 "jobs run buffered")
    plots.save(fig, path)


# ---------------------------------------------------------------- scale sweep
SWEEP_GEOMETRIES = [(4, 2), (8, 3)]
SWEEP_SERVERS = [6, 9, 12]
SWEEP_JOBS = {"seqwrite-1M-buffered", "seqread-1M-direct",
              "randread-4K-direct-qd1", "randread-4K-direct-qd8",
              "randwrite-4K"}


def sweep_points(geometries=None, servers=None):
    return [(n, k, m) for (k, m) in (geometries or SWEEP_GEOMETRIES)
            for n in (servers or SWEEP_SERVERS) if n >= k + m]


def run_sweep(a):
    """One cluster per (N, k+m) point: reduced healthy matrix plus a degraded
    seqread-1M-direct (one server killed).  Returns (rows, errors)."""
    rows, errors = [], []
    jobs = [j for j in job_matrix(False, a.size, a.runtime)
            if j[0] in SWEEP_JOBS]
    if a.quick:
        jobs = [j for j in jobs if j[0] in ("seqwrite-1M-buffered",
                                            "seqread-1M-direct")]
    deg = [j for j in jobs if j[0] == "seqread-1M-direct"]
    points = sweep_points(a.sweep_geometries, a.sweep_servers)
    t0 = time.time()
    for i, (n, k, m) in enumerate(points):
        pa = argparse.Namespace(**vars(a))
        pa.servers, pa.k, pa.m = n, k, m
        b = Bench(pa)
        b.t0 = t0
        b.log.t0 = t0
        b.log(f"sweep point {i + 1}/{len(points)}: {n} servers {k}+{m}")
        try:
            b.up()
            b.phase("healthy", jobs)
            b.sf("cluster", "kill", "--dir", b.cdir, "--server",
                 str(a.victim), "--signal", "9")
            time.sleep(1)
            b.phase("degraded", deg)
        except KeyboardInterrupt:
            b.down()
            raise
        except Exception as e:
            b.log(f"sweep point {n} servers {k}+{m} failed: {e}")
            errors.append(f"{n} servers {k}+{m}: {e}")
        finally:
            b.down()
        for r in b.rows:
            r.update({"servers": n, "k": k, "m": m})
            cpu = sum(v for v in r.get("cpu_s", {}).values() if v)
            r["cpu_all_s"] = round(cpu, 3)
            r["cpu_s_per_gib"] = (round(cpu / (r["io_mib"] / 1024.0), 2)
                                  if r.get("io_mib") else None)
        rows += b.rows
    return rows, errors


SWEEP_COLS = ["servers", "k", "m", "phase", "job", "mib_s", "iops",
              "lat_mean_us", "lat_p99_us", "cpu_fuse_daemon_s",
              "cpu_servers_s", "cpu_s_per_gib", "full_stripe_writes",
              "rmw_stripes", "degraded_reads"]


def write_sweep_outputs(rows, errors, out, meta):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "errors": errors, "rows": rows}, f, indent=1)

    def sflat(r):
        d = flat(r)
        d.update({k: r.get(k) for k in ("servers", "k", "m",
                                         "cpu_s_per_gib")})
        return {k: d.get(k) for k in SWEEP_COLS}
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SWEEP_COLS)
        w.writeheader()
        for r in rows:
            w.writerow(sflat(r))
    # summary: one line per (geometry, N), one column per job (MiB/s or IOPS)
    jobs = []
    for r in rows:
        key = f"{r['phase']}:{r['job']}"
        if key not in jobs:
            jobs.append(key)
    points = []
    for r in rows:
        pt = (r["k"], r["m"], r["servers"])
        if pt not in points:
            points.append(pt)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"stripefs scale sweep, {meta['date']}, cell "
                f"{meta['cell_size']}, {meta['size_mib']} MiB files, "
                f"{meta['runtime_s']} s jobs, one run per point; load "
                f"average {meta.get('loadavg_start')} at start, "
                f"{meta.get('loadavg_end')} at end"
                f"{' (quick)' if meta['quick'] else ''}\n\n")
        f.write("Throughput (4K jobs: IOPS, others: MiB/s); CPU s/GiB = "
                "CPU seconds of all stripefs processes (FUSE daemon, metad, "
                "chunkd) per GiB moved by fio.\n\n")
        f.write("| geometry | servers | " + " | ".join(jobs) + " |\n")
        f.write("|---|---|" + "---|" * len(jobs) + "\n")
        for k, m, n in points:
            cells = []
            for key in jobs:
                ph, job = key.split(":", 1)
                rr = [r for r in rows if (r["k"], r["m"], r["servers"]) ==
                      (k, m, n) and r["phase"] == ph and r["job"] == job]
                if not rr:
                    cells.append("-")
                    continue
                r = rr[0]
                v = (f"{r['iops']:,.0f} IOPS" if "4K" in job
                     else f"{r['mib_s']:.1f} MiB/s")
                if r.get("cpu_s_per_gib") is not None:
                    v += f" ({r['cpu_s_per_gib']:.0f} CPU s/GiB)"
                cells.append(v)
            f.write(f"| {k}+{m} | {n} | " + " | ".join(cells) + " |\n")
        f.write("\nAll columns per row:\n\n")
        f.write("| " + " | ".join(SWEEP_COLS) + " |\n")
        f.write("|" + "---|" * len(SWEEP_COLS) + "\n")
        for r in rows:
            fr = sflat(r)
            f.write("| " + " | ".join(fmt(fr[c]) for c in SWEEP_COLS) +
                    " |\n")
        for e in errors:
            f.write(f"\nError: {e}\n")
    try:
        plot_sweep(rows, os.path.join(out, "sweep.png"))
    except Exception as e:
        print(f"warning: plot not written: {e}", file=sys.stderr)


def plot_sweep(rows, path):
    """Throughput vs N, one panel per job, one line per geometry."""
    plt = plots.pyplot()
    keys = []
    for r in rows:
        key = (r["phase"], r["job"])
        if key not in keys:
            keys.append(key)
    cols = min(3, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows),
                             squeeze=False)
    geos = sorted({(r["k"], r["m"]) for r in rows})
    for i, (ph, job) in enumerate(keys):
        ax = axes[i // cols][i % cols]
        use_iops = "4K" in job
        for k, m in geos:
            pts = sorted((r["servers"], r["iops"] if use_iops else r["mib_s"])
                         for r in rows if r["phase"] == ph and
                         r["job"] == job and (r["k"], r["m"]) == (k, m))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                        label=f"{k}+{m}")
        ax.set_title(f"{ph}: {job}", fontsize=9)
        ax.set_xlabel("chunk servers N")
        ax.set_ylabel("IOPS" if use_iops else "MiB/s")
        ax.set_xticks(sorted({r["servers"] for r in rows}))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    for j in range(len(keys), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle("stripefs throughput vs number of chunk servers per "
                 "geometry (loopback, 2-core VM)")
    plots.save(fig, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", type=int, default=6)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--cell-size", type=int, default=262144)
    p.add_argument("--out", default=None,
                   help="output dir (default: a fresh "
                        "cluster-bench-YYYYmmdd-HHMMSS under the current one)")
    p.add_argument("--update-docs", action="store_true",
                   help="write into docs/results/cluster/ of the checkout "
                        "(the committed tables) instead of --out")
    p.add_argument("--quick", action="store_true",
                   help="tiny matrix for smoke tests (seconds)")
    p.add_argument("--size", type=int, default=None, help="file MiB")
    p.add_argument("--runtime", type=int, default=None, help="s per job")
    p.add_argument("--victim", type=int, default=1,
                   help="chunkd id killed in the degraded phase")
    p.add_argument("--repair-mode", choices=["restart", "out"],
                   default="restart",
                   help="repair phase: restart the killed server (default) or "
                        "mark it out (needs servers > k+m)")
    p.add_argument("--ioengine", default="libaio",
                   help="engine of the QD1/QD8 jobs (libaio or io_uring)")
    p.add_argument("--transport", default="dev",
                   help="transport of the main mount (dev; auto or uring "
                        "also work)")
    p.add_argument("--uring", choices=["auto", "off"], default="auto",
                   help="auto (default): also run the healthy matrix on a "
                        "second mount over io-uring (enable_uring set and "
                        "restored) when the kernel has the knob")
    p.add_argument("--coalesce", default="on")
    p.add_argument("--fsync-timeout", type=int, default=480,
                   help="extra seconds allowed to end_fsync jobs (default "
                        "480)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the tmpfs reference rows")
    p.add_argument("--no-passthrough", action="store_true",
                   help="skip the libfuse passthrough_ll reference rows")
    p.add_argument("--stripefs", default=os.environ.get("STRIPEFS_BIN"),
                   help="path of the stripefs binary")
    p.add_argument("--netns", action="store_true",
                   help="hosts as network namespaces (`cluster up --netns`, "
                        "root): metad and each chunkd in its own namespace "
                        "on a bridge, the mount in ours")
    p.add_argument("--link-rate", default="",
                   help="with --netns: tc tbf rate of every host link "
                        "(1gbit, 10gbit)")
    p.add_argument("--netem", default="",
                   help="with --netns: tc netem arguments of every host link "
                        "(fails where the kernel has no sch_netem)")
    p.add_argument("--sweep", action="store_true",
                   help="scale sweep instead of the phase run: one cluster "
                        "per N in --sweep-servers and k+m in "
                        "--sweep-geometries (N >= k+m), reduced matrix, "
                        "output in OUT/sweep/")
    p.add_argument("--sweep-servers", default="6,9,12",
                   help="comma list of N (default 6,9,12)")
    p.add_argument("--sweep-geometries", default="4+2,8+3",
                   help="comma list of k+m (default 4+2,8+3)")
    a = p.parse_args()
    if (a.link_rate or a.netem) and not a.netns:
        sys.exit("bench_cluster: --link-rate and --netem need --netns")
    if a.netns and os.geteuid() != 0:
        sys.exit("bench_cluster: --netns needs root (network namespaces); "
                 "run as root or drop --netns")
    try:
        a.sweep_servers = [int(x) for x in a.sweep_servers.split(",") if x]
        a.sweep_geometries = [tuple(int(y) for y in g.split("+"))
                              for g in a.sweep_geometries.split(",") if g]
        assert all(len(g) == 2 for g in a.sweep_geometries)
    except (ValueError, AssertionError):
        sys.exit("bench_cluster: --sweep-servers takes e.g. 6,9,12 and "
                 "--sweep-geometries e.g. 4+2,8+3")
    if a.size is None:
        a.size = 16 if a.quick else 128
    if a.runtime is None:
        a.runtime = 1 if a.quick else 6
    if a.update_docs and a.out:
        sys.exit("bench_cluster: --out and --update-docs exclude each other")
    if a.update_docs:
        a.out = DOCS_OUT
    elif not a.out:
        a.out = run.fresh_out("cluster-bench", "bench_cluster")
    a.stripefs = require_binary("bench_cluster", a.stripefs)
    run.require_mount_host("bench_cluster", "mount, drop_caches")

    run.raise_on_signals()
    if a.sweep:
        return main_sweep(a)

    b = Bench(a)
    meta = run.host_meta()
    meta.update({"servers": a.servers, "k": a.k, "m": a.m,
                 "cell_size": a.cell_size, "size_mib": a.size,
                 "runtime_s": a.runtime, "quick": a.quick,
                 "victim": a.victim, "ioengine": a.ioengine,
                 "transport": a.transport, "coalesce": a.coalesce,
                 "repair_mode": a.repair_mode,
                 "network": network_label(a)})

    def teardown():
        meta["mount_banner"] = getattr(b, "mount_banner", "")
        meta["main_transport"] = getattr(b, "main_transport", None)
        meta["uring_note"] = b.uring_note
        b.down()
    rc = run.guarded(b.run, teardown, b.log)
    meta["loadavg_end"] = sampling.loadavg()
    meta["wall_s"] = round(time.time() - b.t0, 1)
    if b.rows:
        meta["complete"] = rc == 0
        add_ratios(b.rows)
        write_outputs(b, a.out, meta)
        print(f"\nsummary ({len(b.rows)} jobs, {meta['wall_s']:.0f} s, load "
              f"{meta['loadavg_start'][0]} -> {meta['loadavg_end'][0]}) -> "
              f"{a.out}")
        for r in b.rows:
            print(f"  {r['target']:14s} {r['phase']:9s} {r['job']:26s} "
                  f"{r['mib_s']:8.1f} MiB/s {r['iops']:9.0f} IOPS "
                  f"{ratio_text(r)}")
        if b.repair:
            print(f"  repair: {fmt(b.repair['rebuilt_mib'])} MiB in "
                  f"{fmt(b.repair['repair_s'])} s "
                  f"({fmt(b.repair['rebuild_mib_s'])} MiB/s)")
    return rc


def network_label(a):
    if not a.netns:
        return "loopback"
    return ("netns, links " + (a.link_rate or "unlimited") +
            (f", netem {a.netem}" if a.netem else ""))


def main_sweep(a):
    out = os.path.join(a.out, "sweep")
    meta = run.host_meta()
    meta.update({"cell_size": a.cell_size, "size_mib": a.size,
                 "runtime_s": a.runtime, "quick": a.quick,
                 "victim": a.victim, "ioengine": a.ioengine,
                 "transport": a.transport, "coalesce": a.coalesce,
                 "points": sweep_points(a.sweep_geometries,
                                        a.sweep_servers)})
    if not meta["points"]:
        sys.exit("bench_cluster: no sweep point has N >= k+m")
    rc = 0
    t0 = time.time()
    rows, errors = [], []
    try:
        rows, errors = run_sweep(a)
    except KeyboardInterrupt:
        print("interrupted; tore down", flush=True)
        rc = 130
    meta["loadavg_end"] = sampling.loadavg()
    meta["wall_s"] = round(time.time() - t0, 1)
    meta["complete"] = rc == 0 and not errors
    if errors:
        rc = rc or 1
    if rows:
        write_sweep_outputs(rows, errors, out, meta)
        print(f"\nsweep summary ({len(rows)} jobs, {meta['wall_s']:.0f} s, "
              f"load {meta['loadavg_start'][0]} -> "
              f"{meta['loadavg_end'][0]}) -> {out}")
        for r in rows:
            print(f"  {r['k']}+{r['m']} N={r['servers']:2d} {r['phase']:9s} "
                  f"{r['job']:26s} {r['mib_s']:8.1f} MiB/s "
                  f"{r['iops']:9.0f} IOPS")
    return rc


if __name__ == "__main__":
    sys.exit(main())
