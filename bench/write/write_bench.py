#!/usr/bin/python3
"""stripefs write-path benchmark: every row against a reference measured in
the same run, printed as one `ratio=` line per row.

The disk reference is fio O_DIRECT 1 MiB writes at QD8 (libaio) into the
run's work directory (default under /var/tmp: the disk every store of the
run lives on). Rows (issue 13):
  a  chunk store alone, durable 1 MiB chunks, 8 writers / disk      >= 0.8
  b  6-server 4+2 cluster mount, 1 MiB buffered seq write with
     end_fsync / (disk x k/(k+m))                                   >= 0.7
  c  embedded mount, same job, same ratio                           >= 0.8
  d  CPU-ms per MiB written, every process (FUSE daemon, metad,
     chunkd, fio), row b's run                                      <= 6
  e  4 KiB random writes, fsync every 64, cluster / passthrough_ll
     over a directory of the same disk                              >= 0.25
  f  creates and unlinks per second (4 dirs, 4 threads), cluster /
     passthrough_ll                                                 >= 0.25
  g  sequential 256 KiB O_DIRECT writes into 4 MiB stripes / aligned
     4 MiB writes (embedded, cell 1 MiB)                            >= 0.9
  h  random 256 KiB O_DIRECT overwrites into 4 MiB stripes (parity
     delta), fsync each / aligned 4 MiB overwrites, fsync each      >= 0.5
Syncs per MiB (ext4 fsync/fdatasync of our processes, counted with perf)
for rows b, c, e, h.

--rows e,h runs only the jobs those rows need (and prints only them).

Row a runs the chunk-store bench binary (bench/chunk/, --chunk-bench); when
it is not built the row says "not built", loudly, and has no figure.

Outputs under --out (default: a fresh write-bench-YYYYmmdd-HHMMSS directory
under the current one; --update-docs writes the committed tables in
docs/results/write/ instead): results.json, results.csv, results.md.
Mounts, the cluster and passthrough_ll are always stopped and
/proc/sys/fs/fuse/max_pages_limit restored (finally block, also on
Ctrl-C/SIGTERM/SIGHUP). Usually started as `stripefs bench write`.
"""
import argparse
import csv
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lib import fio, knobs, passthrough, perf, run, sampling  # noqa: E402
from lib.stripefs import Cluster, Stripefs, require_binary  # noqa: E402

# key -> (what, goal comparison, goal)
ROWS = {
    "a": ("chunk store alone, durable 1 MiB chunks, 8 writers, vs disk",
          ">=", 0.8),
    "b": ("cluster 4+2 mount, 1 MiB buffered seq write + end_fsync, vs "
          "disk x k/(k+m)", ">=", 0.7),
    "c": ("embedded mount, 1 MiB buffered seq write + end_fsync, vs disk x "
          "k/(k+m)", ">=", 0.8),
    "d": ("CPU-ms per MiB, all processes, cluster seq write (ratio = "
          "value / 6)", "<=", 1.0),
    "e": ("4 KiB random writes, fsync every 64, cluster vs passthrough_ll",
          ">=", 0.25),
    "f": ("creates+unlinks per second, cluster vs passthrough_ll (worse "
          "of the two)", ">=", 0.25),
    "g": ("sequential 256 KiB direct writes into 4 MiB stripes vs aligned "
          "4 MiB", ">=", 0.9),
    "h": ("random 256 KiB overwrites into 4 MiB stripes (parity delta), "
          "fsync each, vs aligned 4 MiB", ">=", 0.5),
}
CPU_MS_PER_MIB_GOAL = 6.0
DISK_REF_MIN_MIB, DISK_REF_MIN_S = 1024, 3
CHUNK_BENCH_NAMES = ["bench/chunk/chunk_bench",
                     "bench/chunk/chunk_store_bench"]


def find_chunk_bench(explicit, stripefs_bin):
    """The chunk-store bench binary: --chunk-bench, else bench/chunk/ of the
    build dir holding the stripefs binary, else of ROOT/build. Returns
    (path or None, the places looked at)."""
    if explicit:
        return (explicit if os.access(explicit, os.X_OK) else None), [explicit]
    builds = [os.path.dirname(os.path.dirname(os.path.abspath(stripefs_bin))),
              os.path.join(ROOT, "build")]
    looked = []
    for b in builds:
        for n in CHUNK_BENCH_NAMES:
            p = os.path.join(b, n)
            if p in looked:
                continue
            looked.append(p)
            if os.access(p, os.X_OK):
                return p, looked
    return None, looked


def parse_mib_s(text):
    """MiB/s from the chunk bench's output: a JSON object with "mib_s" or a
    `mib_s=X` token (the last one wins)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                v = json.loads(line).get("mib_s")
                if isinstance(v, (int, float)):
                    return float(v)
            except ValueError:
                pass
    m = re.findall(r"mib_s=([0-9.]+)", text)
    return float(m[-1]) if m else None


def meta_ops(directory, files, dirs=4, threads=4):
    """Creates `files` empty files in `dirs` directories from `threads`
    threads (thread i works in directory i % dirs), then unlinks them.
    Returns (creates/s, unlinks/s)."""
    top = os.path.join(directory, "meta-ops")
    os.makedirs(top)
    for d in range(dirs):
        os.mkdir(os.path.join(top, f"d{d}"))
    per = files // threads
    names = [[os.path.join(top, f"d{t % dirs}", f"t{t}-f{i}")
              for i in range(per)] for t in range(threads)]
    errors = []

    def each(fn):
        def body(t):
            try:
                for p in names[t]:
                    fn(p)
            except OSError as e:
                errors.append(e)
        ts = [threading.Thread(target=body, args=(t,))
              for t in range(threads)]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errors:
            raise RuntimeError(f"meta ops in {directory}: {errors[0]}")
        return per * threads / (time.time() - t0)

    def create(p):
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    creates = each(create)
    unlinks = each(os.unlink)
    for d in range(dirs):
        os.rmdir(os.path.join(top, f"d{d}"))
    os.rmdir(top)
    return creates, unlinks


class WriteBench:
    def __init__(self, a):
        self.a = a
        self.work = tempfile.mkdtemp(prefix="stripefs-wbench-",
                                     dir=a.workdir)
        self.log = run.Log()
        self.sf = Stripefs(a.stripefs)
        self.cluster = Cluster(self.sf, os.path.join(self.work, "cluster"))
        self.max_pages = knobs.Knob(knobs.MAX_PAGES_LIMIT, self.log)
        self.mounted = []  # stripefs mount points to unmount
        self.pt = None
        self.m = {}  # measurement name -> figures, or {"error": text}
        self.profiles = {}  # job name -> flat perf profile (--profile)
        self.notes = []

    # ------------------------------------------------------------ teardown
    def teardown(self):
        for mnt in list(self.mounted):
            self.umount(mnt)
        if self.pt:
            self.pt.stop()
            self.pt = None
        self.cluster.down()
        self.max_pages.restore()
        run.remove_work(self.work, self.log)

    def mount(self, *argv):
        mnt = argv[-1]
        os.makedirs(mnt, exist_ok=True)
        pid, banner = self.sf.mount(*argv, "--transport=dev")
        self.mounted.append(mnt)
        self.log(f"mounted {mnt} (daemon pid {pid})")
        return pid

    def umount(self, mnt):
        self.sf.umount(mnt)
        self.mounted.remove(mnt)

    # --------------------------------------------------------- measuring
    def measure(self, name, fn):
        """Runs fn() -> figures; a failure is recorded, not raised (one row
        fails, the others still run), unless it is an interrupt."""
        try:
            self.m[name] = fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:
            self.log(f"{name} failed: {e}")
            self.m[name] = {"error": str(e)}
        return self.m[name]

    def abba(self, name_a, job_a, name_b, job_b):
        """Runs job_a, job_b, job_b, job_a (short jobs on a shared machine:
        drift hits both sides alike) and keeps per side the mean MiB/s and
        IOPS, the summed MiB, CPU and syncs, and each run's MiB/s."""
        runs = {name_a: [], name_b: []}
        for name, job in ((name_a, job_a), (name_b, job_b), (name_b, job_b),
                          (name_a, job_a)):
            fig = self.measure(name, job)
            if "error" in fig:
                return
            runs[name].append(fig)
        for name, figs in runs.items():
            merged = dict(figs[0])
            for k in ("mib_s", "iops"):
                merged[k] = sum(f[k] for f in figs) / len(figs)
            merged["io_mib"] = sum(f["io_mib"] for f in figs)
            merged["runs_mib_s"] = [round(f["mib_s"], 2) for f in figs]
            for k in ("cpu_s", "syncs", "backend"):
                if figs[0].get(k) is not None:
                    merged[k] = {n: round(sum((f.get(k) or {}).get(n, 0)
                                              for f in figs), 3)
                                 for n in figs[0][k]}
            self.m[name] = merged

    def fio_job(self, directory, name, fioargs, pids=None, count_syncs=False,
                timeout=None):
        """One fio job; figures plus CPU seconds of `pids` and of fio itself
        (RUSAGE_CHILDREN of this process around the run), on a stripefs
        mount the change of its backend counters (`stripefs stat`), and,
        when asked, the syncs of `pids`."""
        pids = pids or {}
        on_stripefs = directory in self.mounted
        b0 = self.backend(directory) if on_stripefs else {}
        counter = perf.SyncCounter(self.log).start() if count_syncs else None
        meter = sampling.CpuMeter(pids).start()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        la = sampling.loadavg()
        t0 = time.time()
        res = fio.run(directory, name, fioargs,
                      timeout or self.a.job_timeout)
        wall = time.time() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = meter.stop()
        cpu["fio"] = round((ru1.ru_utime - ru0.ru_utime) +
                           (ru1.ru_stime - ru0.ru_stime), 3)
        out = fio.summarize(res, "write")
        out.update({"wall_s": round(wall, 2), "cpu_s": cpu,
                    "loadavg_1m": la[0]})
        if counter:
            out["syncs"] = counter.stop(pids)
        if on_stripefs:
            b1 = self.backend(directory)
            out["backend"] = {k: v - b0.get(k, 0) for k, v in b1.items()}
        self.log(f"{name:22s} {out['mib_s']:8.1f} MiB/s {out['iops']:9.0f} "
                 f"IOPS, {out['io_mib']:.0f} MiB in {wall:.1f} s (load "
                 f"{la[0]:.1f})")
        return out

    def backend(self, mnt):
        """The mount's numeric backend counters (`stripefs stat --json`)."""
        st = self.sf.stat(mnt)
        b = st.get("backend", {})
        out = {k: v for k, v in b.items() if isinstance(v, (int, float))
               and not k.endswith("_pct")}
        # Why buffered stripes went out (fsync, idle, memory cap ...).
        pf = st.get("coalescing", {}).get("partial_flushes", {})
        out.update({"partial_flushes_" + k: v for k, v in pf.items()
                    if isinstance(v, (int, float))})
        return out

    def profiled(self, name, pids, fn):
        """With --profile: runs fn() once more (a separate, shorter job, so
        the measured rows stay unprofiled) under a flat perf profile of
        `pids`, kept in self.profiles[name]."""
        if not self.a.profile:
            return
        prof = perf.Profiler(pids, self.log).start()
        try:
            fn()
        except Exception as e:  # a profile is extra; never lose the rows
            self.log(f"profile {name}: job failed: {e}")
        text = prof.stop()
        if text:
            self.profiles[name] = text

    def seq_write_args(self, size_mib, filename):
        return ["--rw=write", "--bs=1M", f"--size={size_mib}M",
                "--end_fsync=1", f"--filename={filename}"]

    # ------------------------------------------------------------ phases
    def disk_reference(self):
        disk = os.path.join(self.work, "disk")
        os.makedirs(disk)
        # At least 1 GiB and 3 s: a few hundred MiB of O_DIRECT writes can
        # land in the virtual disk's cache and flatter the reference.
        self.measure("disk", lambda: self.fio_job(disk, "disk-ref", [
            "--rw=write", "--bs=1M", "--iodepth=8", "--ioengine=libaio",
            "--direct=1", f"--size={self.disk_ref_mib()}M", "--time_based",
            f"--runtime={DISK_REF_MIN_S}", "--end_fsync=1",
            "--filename=ref"]))
        os.unlink(os.path.join(disk, "ref"))

    def disk_ref_mib(self):
        return max(self.a.size, DISK_REF_MIN_MIB)

    def chunk_store(self):
        exe, looked = find_chunk_bench(self.a.chunk_bench, self.a.stripefs)
        if not exe:
            self.m["chunk"] = {"not_built": "no chunk-store bench binary at "
                               + " or ".join(looked)}
            self.log("ROW a NOT BUILT: " + self.m["chunk"]["not_built"])
            return
        d = os.path.join(self.work, "chunkstore")

        def go():
            argv = [exe, d, "--writers", "8", "--chunk-kib", "1024",
                    "--mib", str(self.a.size)]
            t0 = time.time()
            r = subprocess.run(argv, capture_output=True, text=True,
                               timeout=self.a.job_timeout)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}:"
                                   f" {r.stderr.strip()[-300:]}")
            v = parse_mib_s(r.stdout)
            if v is None:
                raise RuntimeError(f"{exe} printed no mib_s: "
                                   f"{r.stdout.strip()[-300:]}")
            out = {"mib_s": v, "wall_s": round(time.time() - t0, 2),
                   "command": " ".join(argv)}
            # The store run's own CPU (first line: the default options).
            cpu = re.search(r"cpu_ms_per_MiB=([0-9.]+)", r.stdout)
            if cpu:
                out["cpu_ms_per_mib"] = float(cpu.group(1))
            return out
        self.measure("chunk", go)
        shutil.rmtree(d, ignore_errors=True)

    def wants(self, rows):
        """True if any of `rows` (e.g. "bd") was selected with --rows."""
        return any(r in self.a.rows for r in rows)

    def cluster_phase(self):
        a = self.a
        self.cluster.up(a.servers, a.k, a.m, 262144)
        mnt = os.path.join(self.work, "cmnt")
        pid = self.mount(*self.cluster.mount_args(), mnt)
        pids = {"fuse-daemon": pid}
        pids.update(self.cluster.pids())
        if self.wants("bd"):
            self.measure("cluster_seq", lambda: self.fio_job(
                mnt, "cluster-seqwrite", self.seq_write_args(a.size, "seq"),
                pids, count_syncs=True))
            self.remove(mnt, "seq")
            self.profiled("cluster-seqwrite", pids, lambda: fio.run(
                mnt, "prof", self.seq_write_args(a.size, "pseq"),
                a.job_timeout))
            self.remove(mnt, "pseq")
        if self.wants("e"):
            self.measure("cluster_rand", lambda: self.fio_job(
                mnt, "cluster-randwrite", self.rand4k_args(), pids,
                count_syncs=True))
            self.remove(mnt, "rand")
            self.profiled("cluster-randwrite", pids, lambda: fio.run(
                mnt, "prof", self.rand4k_args(), a.job_timeout))
            self.remove(mnt, "rand")
        if self.wants("f"):
            self.measure("cluster_meta", lambda: dict(zip(
                ("creates_s", "unlinks_s"), meta_ops(mnt, a.files))))
            self.profiled("cluster-create-unlink", pids,
                          lambda: meta_ops(mnt, max(100, a.files // 4)))
        self.umount(mnt)
        self.cluster.down()

    def rand4k_args(self):
        return ["--rw=randwrite", "--bs=4K", f"--size={self.a.rand_size}M",
                "--fsync=64", "--time_based", f"--runtime={self.a.runtime}",
                "--filename=rand"]

    def remove(self, directory, name):
        p = os.path.join(directory, name)
        if os.path.exists(p):
            os.unlink(p)

    def passthrough_phase(self):
        exe = passthrough.build(self.work, self.log)
        if not exe:
            self.m["pt_rand"] = self.m["pt_meta"] = {
                "error": "passthrough_ll could not be built"}
            return
        src = os.path.join(self.work, "ptsrc")
        os.makedirs(src)
        self.pt = passthrough.Passthrough(
            exe, src, os.path.join(self.work, "ptmnt")).start()
        pids = {"passthrough_ll": self.pt.pid}
        if self.wants("e"):
            self.measure("pt_rand", lambda: self.fio_job(
                self.pt.mnt, "ptll-randwrite", self.rand4k_args(), pids,
                count_syncs=True))
            self.remove(self.pt.mnt, "rand")
        if self.wants("f"):
            self.measure("pt_meta", lambda: dict(zip(
                ("creates_s", "unlinks_s"),
                meta_ops(self.pt.mnt, self.a.files))))
        self.pt.stop()
        self.pt = None

    def embedded_phase(self):
        a = self.a
        vol = os.path.join(self.work, "vol1m")
        self.sf.run("mkfs", vol, "--k", a.k, "--m", a.m, "--cell-size",
                    "256K")
        mnt = os.path.join(self.work, "emnt")
        pids = {"fuse-daemon": self.mount(vol, mnt)}
        self.measure("embedded_seq", lambda: self.fio_job(
            mnt, "embedded-seqwrite", self.seq_write_args(a.size, "seq"),
            pids, count_syncs=True))
        self.umount(mnt)

    def stripe4m_phase(self):
        a = self.a
        vol = os.path.join(self.work, "vol4m")
        self.sf.run("mkfs", vol, "--k", 4, "--m", 2, "--cell-size", "1M")
        # 4 MiB WRITEs need max_pages 1024; the mount raises the system-wide
        # limit itself but does not put it back, so remember it here.
        if self.max_pages.exists() and int(
                knobs.read(knobs.MAX_PAGES_LIMIT)) < 1024:
            self.max_pages.set(1024)
        mnt = os.path.join(self.work, "smnt")
        pids = {"fuse-daemon": self.mount(vol, mnt)}
        sz = a.stripe_size
        direct = ["--direct=1", f"--size={sz}M", "--end_fsync=1"]

        def seq(name, bs, filename):
            def job():
                self.remove(mnt, filename)
                return self.fio_job(mnt, name, [
                    "--rw=write", f"--bs={bs}",
                    f"--filename={filename}"] + direct, pids)
            return job
        if self.wants("g"):
            self.abba("g_aligned", seq("aligned-4M", "4M", "g4m"),
                      "g_256k", seq("seq-256K", "256K", "g256k"))
            self.remove(mnt, "g256k")
        else:  # h overwrites g's reference file: write it, unmeasured
            fio.run(mnt, "g4m", ["--rw=write", "--bs=4M",
                                 "--filename=g4m"] + direct, a.job_timeout)
        if not self.wants("h"):
            self.umount(mnt)
            return
        # Overwrites of g4m (written above, whole stripes), fsync after each.
        over = ["--direct=1", f"--size={sz}M", "--fsync=1", "--time_based",
                f"--runtime={a.runtime}", "--filename=g4m", "--norandommap",
                "--randrepeat=1"]
        self.abba("h_aligned", lambda: self.fio_job(
            mnt, "overwrite-4M", ["--rw=randwrite", "--bs=4M"] + over, pids,
            count_syncs=True), "h_256k", lambda: self.fio_job(
            mnt, "overwrite-256K", ["--rw=randwrite", "--bs=256K"] + over,
            pids, count_syncs=True))
        self.profiled("overwrite-256K", pids, lambda: fio.run(
            mnt, "prof", ["--rw=randwrite", "--bs=256K"] + over,
            a.job_timeout))
        self.umount(mnt)

    def run(self):
        if self.wants("abc"):
            self.disk_reference()
        if self.wants("a"):
            self.chunk_store()
        if self.wants("bdef"):
            self.cluster_phase()
        if self.wants("ef"):
            self.passthrough_phase()
        if self.wants("c"):
            self.embedded_phase()
        if self.wants("gh"):
            self.stripe4m_phase()


# ---------------------------------------------------------------- rows
def syncs_per_mib(fig):
    """(total syncs / MiB written, {group: syncs}) or (None, None)."""
    s = fig.get("syncs")
    if not s or not fig.get("io_mib"):
        return None, None
    groups = {}
    for name, n in s.items():
        g = name.split(".")[0]  # chunkd.3 -> chunkd
        groups[g] = groups.get(g, 0) + n
    return round(sum(s.values()) / fig["io_mib"], 2), groups


def make_row(key, m, num, den, value_of, unit, ref_of=None, ref_unit=None,
             scale=1.0):
    """A row from measurements `num` and `den` (names in m): ratio =
    value_of(num) / (value_of-or-ref_of(den) * scale)."""
    what, op, goal = ROWS[key]
    row = {"row": key, "what": what, "goal": f"{op}{goal}", "unit": unit,
           "value": None, "reference": None, "ratio": None}
    for n in (num, den):
        if n and "not_built" in m.get(n, {}):
            row["status"] = "not built"
            row["error"] = m[n]["not_built"]
            return row
        if n and (n not in m or "error" in m[n]):
            row["status"] = "failed"
            row["error"] = m.get(n, {}).get("error", f"{n} did not run")
            return row
    row["value"] = value_of(m[num])
    if den:
        ref = (ref_of or value_of)(m[den]) * scale
        row["reference"] = ref
        row["ref_unit"] = ref_unit or unit
        row["ratio"] = row["value"] / ref if ref else None
    if row["ratio"] is None or row["value"] is None:
        row["status"] = "failed"
        row["error"] = "no figure"
        return row
    met = row["ratio"] >= goal if op == ">=" else row["ratio"] <= goal
    row["status"] = "meets goal" if met else "misses goal"
    return row


def cpu_ms_per_mib(fig):
    return 1000.0 * sum(fig["cpu_s"].values()) / fig["io_mib"]


ROW_SOURCE = {"b": "cluster_seq", "c": "embedded_seq"}


def add_cpu_ceiling(row, fig):
    """A sequential-write row's CPU-ms per MiB (every process of the job,
    fio included) and the MiB/s this machine's CPUs could carry at that
    cost (cpu_bound_mib_s = CPUs x 1000 / CPU-ms per MiB): when the value
    is near it, the row is bound by CPU, not by the disk or the syncs."""
    if not fig or "cpu_s" not in fig or not fig.get("io_mib"):
        return
    per_mib = cpu_ms_per_mib(fig)
    if per_mib <= 0:
        return
    row["cpu_ms_per_mib"] = round(per_mib, 2)
    row["cpu_bound_mib_s"] = round((os.cpu_count() or 1) * 1000.0 / per_mib,
                                   1)


def all_rows(m, a):
    mib_s = lambda f: f["mib_s"]  # noqa: E731
    iops = lambda f: f["iops"]  # noqa: E731
    share = a.k / (a.k + a.m)
    rows = [
        make_row("a", m, "chunk", "disk", mib_s, "MiB/s"),
        make_row("b", m, "cluster_seq", "disk", mib_s, "MiB/s",
                 scale=share),
        make_row("c", m, "embedded_seq", "disk", mib_s, "MiB/s",
                 scale=share),
    ]
    d = make_row("d", m, "cluster_seq", None, cpu_ms_per_mib, "CPU-ms/MiB")
    if d["value"] is not None:
        d["reference"], d["ref_unit"] = CPU_MS_PER_MIB_GOAL, "CPU-ms/MiB"
        d["ratio"] = d["value"] / CPU_MS_PER_MIB_GOAL
        d["fixed_goal"] = True  # no reference measured: printed goal_ratio=
        d["status"] = "meets goal" if d["ratio"] <= 1.0 else "misses goal"
        d["cpu_s"] = m["cluster_seq"]["cpu_s"]
    rows.append(d)
    for r in rows[1:3]:  # b, c: what this machine's CPUs allow at all
        add_cpu_ceiling(r, m.get(ROW_SOURCE[r["row"]]))
    rows.append(make_row("e", m, "cluster_rand", "pt_rand", iops, "IOPS"))
    fc = make_row("f", m, "cluster_meta", "pt_meta",
                  lambda f: f["creates_s"], "creates/s")
    fu = make_row("f", m, "cluster_meta", "pt_meta",
                  lambda f: f["unlinks_s"], "unlinks/s")
    f = fc if fc["ratio"] is None or fu["ratio"] is None or \
        fc["ratio"] <= fu["ratio"] else fu
    f = dict(f)
    if fc["ratio"] is not None and fu["ratio"] is not None:
        f["creates"] = {k: fc[k] for k in ("value", "reference", "ratio")}
        f["unlinks"] = {k: fu[k] for k in ("value", "reference", "ratio")}
    rows.append(f)
    rows.append(make_row("g", m, "g_256k", "g_aligned", mib_s, "MiB/s"))
    rows.append(make_row("h", m, "h_256k", "h_aligned", mib_s, "MiB/s"))
    src = {"b": "cluster_seq", "c": "embedded_seq", "d": "cluster_seq",
           "e": "cluster_rand", "h": "h_256k"}
    ref_src = {"e": "pt_rand", "h": "h_aligned"}
    for r in rows:
        for field, table in (("syncs_per_mib", src),
                             ("ref_syncs_per_mib", ref_src)):
            fig = m.get(table.get(r["row"]), {})
            spm, groups = syncs_per_mib(fig)
            if spm is not None:
                r[field] = spm
                r[field.replace("per_mib", "by_process")] = groups
    return [r for r in rows if r["row"] in a.rows]


fmtn = run.fmtn


def row_line(r):
    """The one line a row prints: `ratio=` first, then the raw figures."""
    head = f"row {r['row']}: {r['what']}:"
    if r["status"] in ("not built", "failed"):
        return (f"{head} ratio=- {r['status'].upper()}: {r.get('error')}")
    # A ratio to a fixed goal is no ratio to a reference measured in the run.
    key = "goal_ratio" if r.get("fixed_goal") else "ratio"
    s = (f"{head} {key}={r['ratio']:.3f} (goal {r['goal']}: "
         f"{r['status']}) value={fmtn(r['value'])} {r['unit']} "
         f"reference={fmtn(r['reference'])} {r['ref_unit']}")
    if "creates" in r:
        s += (f" creates={fmtn(r['creates']['value'])}/"
              f"{fmtn(r['creates']['reference'])} unlinks="
              f"{fmtn(r['unlinks']['value'])}/"
              f"{fmtn(r['unlinks']['reference'])} per s")
    if "cpu_s" in r:
        s += " cpu_s=" + ",".join(f"{k}:{v}" for k, v in r["cpu_s"].items())
    if "cpu_bound_mib_s" in r:
        s += (f" cpu_ms/MiB={r['cpu_ms_per_mib']} cpu_bound="
              f"{fmtn(r['cpu_bound_mib_s'])} MiB/s")
    if "syncs_per_mib" in r:
        s += f" syncs/MiB={r['syncs_per_mib']}"
    if "ref_syncs_per_mib" in r:
        s += f" reference syncs/MiB={r['ref_syncs_per_mib']}"
    return s


# ------------------------------------------------------------- outputs
CSV_COLS = ["row", "what", "status", "ratio", "goal", "value", "unit",
            "reference", "ref_unit", "syncs_per_mib", "ref_syncs_per_mib",
            "error"]


def reference_note(m, a):
    d = m.get("disk")
    if d is None:
        return "disk reference: not run (--rows " + ",".join(a.rows) + ")"
    if "mib_s" not in d:
        return "disk reference: failed"
    return (f"disk reference (fio O_DIRECT 1 MiB QD8 libaio, "
            f"{d['io_mib']:.0f} MiB over a {max(a.size, DISK_REF_MIN_MIB)} "
            f"MiB file in {DISK_REF_MIN_S} s, in {a.workdir}): "
            f"{d['mib_s']:.1f} MiB/s; x k/(k+m) = "
            f"{d['mib_s'] * a.k / (a.k + a.m):.1f} MiB/s of user data")


def write_outputs(rows, m, meta, a):
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "measurements": m}, f,
                  indent=1)
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    la0 = "/".join(str(x) for x in meta["loadavg_start"])
    la1 = "/".join(str(x) for x in meta.get("loadavg_end", []))
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(f"stripefs write bench{' (quick)' if a.quick else ''}, "
                f"{meta['date']}, commit {meta.get('commit')}, kernel "
                f"{meta['kernel']}, {meta['cpus']} CPUs; load average "
                f"(1/5/15 min) {la0} at start, {la1} at end; "
                f"{meta.get('wall_s')} s.\n\n")
        f.write(reference_note(m, a) + ".\n\n")
        f.write("| row | what | ratio | goal | status | value | reference "
                "| syncs/MiB (ref) |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            sp = fmtn(r.get("syncs_per_mib"))
            if r.get("ref_syncs_per_mib") is not None:
                sp += f" ({fmtn(r['ref_syncs_per_mib'])})"
            val = (f"{fmtn(r['value'])} {r['unit']}"
                   if r["value"] is not None else r.get("error", "-"))
            ref = (f"{fmtn(r['reference'])} {r['ref_unit']}"
                   if r["reference"] is not None else "-")
            ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
            if r.get("fixed_goal") and r["ratio"] is not None:
                ratio += " (to the fixed goal)"
            f.write(f"| {r['row']} | {r['what']} | {ratio} | {r['goal']} | "
                    f"{r['status']} | {val} | {ref} | {sp} |\n")
        f.write("\nRaw figures per measurement (fio: MiB/s, IOPS, MiB "
                "written, wall s, CPU s per process, syncs per process):"
                "\n\n")
        for name, fig in m.items():
            f.write(f"- {name}: {json.dumps(fig, sort_keys=True)}\n")
        for n in meta.get("notes", []):
            f.write(f"\nNote: {n}\n")


def git_commit():
    return run.git_commit(ROOT)


# option, full run, --quick, what it sets
SIZES = [
    ("size", 1024, 256, "MiB of the sequential 1 MiB jobs and the disk "
     "reference"),
    ("stripe_size", 256, 64, "MiB of the 4 MiB-stripe file of rows g/h "
     "(a multiple of 4)"),
    ("rand_size", 64, 16, "MiB of the 4 KiB random-write file"),
    ("runtime", 10, 3, "s of the timed jobs (rows e, h)"),
    ("files", 5000, 1000, "files created and unlinked (row f)"),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="256 MiB sequential jobs, 1,000 files, 3 s timed "
                        "jobs: a few minutes")
    for name, full, quick, what in SIZES:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                       help=f"{what} (default {full}; quick {quick})")
    p.add_argument("--servers", type=int, default=6)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--m", type=int, default=2)
    p.add_argument("--workdir", default="/var/tmp",
                   help="where every store, mount and the disk reference "
                        "live (default /var/tmp: a disk, not tmpfs)")
    p.add_argument("--out", default=None,
                   help="output directory (default: a fresh "
                        "write-bench-YYYYmmdd-HHMMSS under the current one)")
    p.add_argument("--update-docs", action="store_true",
                   help="write into docs/results/write/ of the checkout "
                        "(the committed tables)")
    p.add_argument("--chunk-bench", default=None,
                   help="chunk-store bench binary for row a (default: "
                        "bench/chunk/chunk_bench of the build dir)")
    p.add_argument("--job-timeout", type=int, default=900,
                   help="seconds before one job is given up (default 900)")
    p.add_argument("--profile", action="store_true",
                   help="after rows b, e, f and h, run each job once more "
                        "(shorter) under a flat perf profile of our "
                        "processes; written to OUT/profiles.md")
    p.add_argument("--rows", default=",".join(ROWS),
                   help="comma-separated rows to run, e.g. e,h (default: "
                        "all); only the jobs those rows need run")
    p.add_argument("--stripefs", default=None)
    a = p.parse_args()
    a.rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    bad = [r for r in a.rows if r not in ROWS]
    if bad or not a.rows:
        sys.exit(f"write_bench: unknown row(s) {','.join(bad) or '(none)'} "
                 f"in --rows; pick from {','.join(ROWS)}")
    if a.update_docs and a.out:
        sys.exit("write_bench: --out and --update-docs exclude each other")
    if a.update_docs:
        a.out = os.path.join(ROOT, "docs", "results", "write")
    elif not a.out:
        a.out = run.fresh_out("write-bench", "write_bench")
    run.resolve_sizes(a, SIZES)
    if a.stripe_size % 4:
        sys.exit("write_bench: --stripe-size must be a multiple of 4 MiB")
    a.stripefs = require_binary("write_bench", a.stripefs)
    run.require_mount_host("write_bench", "mount, max_pages_limit")
    return a


def main():
    a = parse_args()
    run.raise_on_signals()
    b = WriteBench(a)
    meta = run.host_meta()
    meta.update({"commit": git_commit(), "quick": a.quick,
                 "size_mib": a.size, "stripe_size_mib": a.stripe_size,
                 "rand_size_mib": a.rand_size, "runtime_s": a.runtime,
                 "files": a.files, "servers": a.servers, "k": a.k,
                 "m": a.m, "workdir": a.workdir, "rows": a.rows,
                 "max_pages_limit_before": knobs.read(knobs.MAX_PAGES_LIMIT)})
    rc = run.timed(b, meta)
    meta["max_pages_limit_after"] = knobs.read(knobs.MAX_PAGES_LIMIT)
    meta["notes"] = b.notes
    rows = all_rows(b.m, a)
    write_outputs(rows, b.m, meta, a)
    if b.profiles:
        with open(os.path.join(a.out, "profiles.md"), "w") as f:
            f.write(f"Flat perf profiles (perf record -F 499 -p <our "
                    f"processes>; samples by process and library, top "
                    f"symbols), "
                    f"one extra job each after the measured one; "
                    f"{meta['date']}, load "
                    f"{meta['loadavg_start'][0]} -> "
                    f"{meta['loadavg_end'][0]}.\n")
            for name, text in b.profiles.items():
                f.write(f"\n## {name}\n\n```\n{text}\n```\n")
    print(f"{run.summary('write', a.quick, meta)}, {reference_note(b.m, a)} "
          f"-> {a.out}")
    for r in rows:
        line = row_line(r)
        print(line, flush=True)
        if r["status"] in ("not built", "failed"):
            print("write_bench: " + line, file=sys.stderr)
    if rc == 0 and any(r["status"] == "failed" for r in rows):
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
