#!/usr/bin/python3
"""stripefs cluster benchmark: fio through a mounted volume on a local cluster.

Brings up a loopback cluster (`stripefs cluster up`), mounts it, and runs a
fio job matrix in three phases: healthy, degraded (one chunkd killed with
SIGKILL) and repair (the server restarted, `stripefs repair` rebuilding its
missing chunks while a foreground fio job runs).  A tmpfs reference row set
runs the same jobs without FUSE.  Per job it records MiB/s, IOPS, mean and p99
latency, CPU seconds of the mount daemon / metad / chunkd processes, their peak
RSS (VmHWM) and the deltas of the `stripefs stat --json` backend counters.

Outputs (under --out): results.json, results.csv, results.md, throughput.png.
The cluster and mount are always torn down (finally block, also on Ctrl-C and
SIGTERM).  Usually started as `stripefs bench cluster [args]`.
"""
import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


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
        self.cluster_up = False
        self.daemon_pid = None
        self.meta = None
        self.key = None
        self.repair = {}
        self.t0 = time.time()

    def log(self, msg):
        print(f"[{time.time() - self.t0:6.1f}s] {msg}", flush=True)

    def sf(self, *argv, check=True, capture=True, timeout=120):
        cmd = [self.args.stripefs] + list(argv)
        r = subprocess.run(cmd, capture_output=capture, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): "
                               f"{r.stderr.strip()} {r.stdout.strip()}")
        return r

    # cluster + mount
    def up(self):
        a = self.args
        self.sf("cluster", "up", "--servers", str(a.servers), "--dir",
                self.cdir, "--k", str(a.k), "--m", str(a.m), "--cell-size",
                str(a.cell_size))
        self.cluster_up = True
        with open(os.path.join(self.cdir, "metad.addr")) as f:
            self.meta = f.read().strip()
        self.key = os.path.join(self.cdir, "cluster.key")
        r = self.sf("mount", "--meta", self.meta, "--key", self.key, self.mnt,
                    f"--transport={a.transport}", f"--coalesce={a.coalesce}")
        self.mounted = True
        m = re.search(r"\(pid (\d+)\)", r.stdout + r.stderr)
        self.daemon_pid = int(m.group(1)) if m else None
        self.mount_banner = r.stdout.strip()
        self.log(f"cluster up: {a.servers} servers {a.k}+{a.m} cell "
                 f"{a.cell_size}, mounted at {self.mnt} "
                 f"(daemon pid {self.daemon_pid})")

    def down(self):
        if self.mounted:
            r = self.sf("umount", self.mnt, check=False)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", self.mnt], check=False)
            self.mounted = False
        if self.cluster_up:
            self.sf("cluster", "down", "--dir", self.cdir, check=False)
            self.cluster_up = False
        self.stop_passthrough()
        if self.tmpfs:
            subprocess.run(["umount", self.tmpfs], check=False)
            self.tmpfs = None
        shutil.rmtree(self.work, ignore_errors=True)

    # process accounting
    def procs(self):
        """name -> pid of the mount daemon, metad and chunkd processes."""
        out = {}
        if self.daemon_pid:
            out["fuse-daemon"] = self.daemon_pid
        if os.path.isdir(self.cdir):
            for fn in sorted(os.listdir(self.cdir)):
                if fn.endswith(".pid"):
                    try:
                        with open(os.path.join(self.cdir, fn)) as f:
                            out[fn[:-4]] = int(f.read().split()[0])
                    except (OSError, ValueError, IndexError):
                        pass
        return out

    @staticmethod
    def cpu_seconds(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / CLK_TCK
        except (OSError, IndexError, ValueError):
            return None

    @staticmethod
    def peak_rss_kib(pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def counters(self):
        if not self.mounted:
            return {}
        r = self.sf("stat", self.mnt, "--json", check=False)
        try:
            return json.loads(r.stdout).get("backend", {})
        except ValueError:
            return {}

    # fio
    def fio(self, directory, name, fioargs, extra_timeout=120):
        argv = ["fio", f"--name={name}", f"--directory={directory}",
                "--output-format=json", "--lat_percentiles=1"]
        argv += [x.replace("IOENGINE", self.args.ioengine) for x in fioargs]
        if not any(x.startswith("--ioengine") for x in argv):
            argv.append("--ioengine=psync")
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=self.args.runtime * 6 + extra_timeout)
        if r.returncode != 0:
            raise RuntimeError(f"fio {name} failed: {r.stderr.strip()[-400:]}")
        # fio may print warnings before the JSON object.
        text = r.stdout[r.stdout.index("{"):]
        return json.loads(text)

    @staticmethod
    def summarize_fio(res, kind):
        j = res["jobs"][0]
        d = j[kind]
        # Total latency (submission + completion) percentiles thanks to
        # --lat_percentiles=1; fall back to completion latency.
        p99 = (d.get("lat_ns", {}).get("percentile", {}).get("99.000000") or
               d.get("clat_ns", {}).get("percentile", {}).get("99.000000"))
        return {
            "mib_s": d["bw_bytes"] / 1048576.0,
            "iops": d["iops"],
            "lat_mean_us": d["lat_ns"]["mean"] / 1000.0,
            "lat_p99_us": p99 / 1000.0 if p99 is not None else None,
            "io_mib": d["io_bytes"] / 1048576.0,
        }

    def drop_caches(self):
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError as e:
            self.log(f"warning: could not drop caches: {e}")

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
        cpu0 = {n: self.cpu_seconds(p) for n, p in procs.items()}
        c0 = self.counters() if with_procs else {}
        t = time.time()
        res = self.fio(directory, name, fioargs)
        wall = time.time() - t
        row = {"target": target, "phase": phase, "job": name, "kind": kind,
               "wall_s": wall}
        row.update(self.summarize_fio(res, kind))
        cpu = {}
        for n, p in procs.items():
            c1 = self.cpu_seconds(p)
            if c1 is not None and cpu0.get(n) is not None:
                cpu[n] = round(c1 - cpu0[n], 3)
        row["cpu_s"] = cpu
        row["cpu_fuse_daemon_s"] = cpu.get("fuse-daemon")
        row["cpu_servers_s"] = round(sum(v for n, v in cpu.items()
                                         if n.startswith("chunkd")), 3) \
            if cpu else None
        rss = {n: self.peak_rss_kib(p) for n, p in procs.items()}
        row["peak_rss_kib"] = rss
        row["peak_rss_fuse_daemon_mib"] = (rss["fuse-daemon"] / 1024.0
                                           if rss.get("fuse-daemon") else None)
        c1 = self.counters() if with_procs else {}
        row["counters"] = {k: v - c0.get(k, 0) for k, v in c1.items()
                           if isinstance(v, (int, float))
                           and k != "full_stripe_pct"}
        self.rows.append(row)
        self.log(f"{target:8s} {phase:9s} {name:26s} "
                 f"{row['mib_s']:8.1f} MiB/s {row['iops']:9.0f} IOPS "
                 f"mean {row['lat_mean_us']:9.1f} us p99 "
                 f"{(row['lat_p99_us'] or 0):9.1f} us")
        return row

    # phases
    def build_passthrough_ll(self):
        """Builds libfuse3's passthrough_ll example; returns path or None."""
        src = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c"
        if not os.path.exists(src) or not shutil.which("gcc"):
            self.log("passthrough_ll reference left out: no example source "
                     "or no gcc")
            return None
        exe = os.path.join(self.work, "passthrough_ll")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"],
                               capture_output=True, text=True)
        r = subprocess.run(["gcc", "-O2", "-o", exe, src] +
                           flags.stdout.split(), capture_output=True,
                           text=True)
        if r.returncode != 0:
            self.log(f"passthrough_ll reference left out: build failed: "
                     f"{r.stderr.strip()[-200:]}")
            return None
        return exe

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
        exe = None if self.args.no_passthrough else self.build_passthrough_ll()
        if exe:
            self.pt_mnt = os.path.join(self.work, "ptll")
            os.makedirs(self.pt_mnt)
            self.pt_proc = subprocess.Popen(
                [exe, "-f", "-o", f"source={self.tmpfs}", self.pt_mnt],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                with open("/proc/mounts") as f:
                    if f" {self.pt_mnt} " in f.read():
                        break
                time.sleep(0.05)
            else:
                raise RuntimeError("passthrough_ll did not mount")
            self.daemon_pid = self.pt_proc.pid
            self.run_reference("fuse-ll", self.pt_mnt, jobs)
            self.daemon_pid = None
            self.stop_passthrough()
        subprocess.run(["umount", self.tmpfs], check=False)
        self.tmpfs = None

    def stop_passthrough(self):
        if getattr(self, "pt_proc", None) is None:
            return
        subprocess.run(["umount", self.pt_mnt], check=False)
        try:
            self.pt_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.pt_proc.kill()
            self.pt_proc.wait()
        self.pt_proc = None

    def phase(self, phase, jobs):
        for name, kind, fioargs in jobs:
            self.run_job("stripefs", phase, self.mnt, name, kind, fioargs)

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
        "degraded_reads", "degraded_writes"]


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
                f"{' (quick)' if meta['quick'] else ''}\n\n")
        f.write("| " + " | ".join(COLS) + " |\n")
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
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        labels = [f"{r['target']}/{r['phase']}: {r['job']}" for r in b.rows]
        vals = [r["mib_s"] for r in b.rows]
        colors = {"reference": "tab:gray", "healthy": "tab:green",
                  "degraded": "tab:orange", "repair": "tab:red"}
        fig, ax = plt.subplots(figsize=(10, 0.32 * len(labels) + 1.5))
        ax.barh(range(len(labels)), vals,
                color=[colors.get(r["phase"], "tab:blue") for r in b.rows])
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("MiB/s (log scale)")
        ax.set_title(f"stripefs cluster bench: {meta['servers']} servers "
                     f"{meta['k']}+{meta['m']} (references in gray)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput.png"), dpi=90)
        plt.close(fig)
    except Exception as e:  # plotting is optional; never lose the data
        print(f"warning: plot not written: {e}", file=sys.stderr)


def find_stripefs():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    cand = os.path.join(root, "build", "tools", "stripefs")
    return cand if os.path.exists(cand) else shutil.which("stripefs")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--servers", type=int, default=6)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--cell-size", type=int, default=262144)
    p.add_argument("--out", default=None,
                   help="output dir (default docs/results/cluster/)")
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
    p.add_argument("--transport", default="auto")
    p.add_argument("--coalesce", default="on")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the tmpfs reference rows")
    p.add_argument("--no-passthrough", action="store_true",
                   help="skip the libfuse passthrough_ll reference rows")
    p.add_argument("--stripefs", default=os.environ.get("STRIPEFS_BIN"),
                   help="path of the stripefs binary")
    a = p.parse_args()
    if a.size is None:
        a.size = 16 if a.quick else 128
    if a.runtime is None:
        a.runtime = 1 if a.quick else 6
    if a.out is None:
        a.out = os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), "docs", "results",
            "cluster")
    if not a.stripefs:
        a.stripefs = find_stripefs()
    if not a.stripefs or not os.path.exists(a.stripefs):
        sys.exit("bench_cluster: stripefs binary not found; pass --stripefs")
    if os.geteuid() != 0:
        sys.exit("bench_cluster: must run as root (mount, drop_caches)")
    if not shutil.which("fio"):
        sys.exit("bench_cluster: fio not found (apt-get install fio)")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    b = Bench(a)
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "servers": a.servers, "k": a.k, "m": a.m,
            "cell_size": a.cell_size, "size_mib": a.size,
            "runtime_s": a.runtime, "quick": a.quick, "victim": a.victim,
            "ioengine": a.ioengine, "host": platform.node(),
            "kernel": platform.release(), "cpus": os.cpu_count(),
            "transport": a.transport, "coalesce": a.coalesce,
            "repair_mode": a.repair_mode}
    rc = 0
    try:
        b.run()
    except KeyboardInterrupt:
        b.log("interrupted; tearing down")
        rc = 130
    except Exception as e:
        b.log(f"error: {e}")
        rc = 1
    finally:
        meta["mount_banner"] = getattr(b, "mount_banner", "")
        b.down()
    if b.rows:
        meta["complete"] = rc == 0
        write_outputs(b, a.out, meta)
        print(f"\nsummary ({len(b.rows)} jobs, "
              f"{time.time() - b.t0:.0f} s) -> {a.out}")
        for r in b.rows:
            print(f"  {r['target']:8s} {r['phase']:9s} {r['job']:26s} "
                  f"{r['mib_s']:8.1f} MiB/s {r['iops']:9.0f} IOPS")
        if b.repair:
            print(f"  repair: {fmt(b.repair['rebuilt_mib'])} MiB in "
                  f"{fmt(b.repair['repair_s'])} s "
                  f"({fmt(b.repair['rebuild_mib_s'])} MiB/s)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
