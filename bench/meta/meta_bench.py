#!/usr/bin/env python3
"""Metadata operations per second: stripefs engines vs passthrough_ll.

`stripefs bench meta [--quick] [--files N] [--out DIR] [--update-docs]`

Over FILES empty files in 4 directories (one thread per directory) it times
five phases through a mount: create (open O_CREAT|O_EXCL, close), stat,
rename (each file to a new name in the next directory), readdir (every
directory listed 3 times) and unlink. Rows, all in one run:

  passthrough  libfuse's passthrough_ll over a tmpfs directory (reference)
  embedded     `stripefs mount DIR MNT`: MetaStore on RocksDB in process
  metad        `stripefs cluster up`: one metad (RocksDB), 3 chunkd
  etcd-1       one metad on a 3-member etcd cluster, one mount
  etcd-2       two metads on the same etcd volume, two mounts (one per
               metad), each running two of the four directories

The etcd rows come from `stripefs cluster up --meta-engine etcd
--etcd-members 3 --metads N --servers 3 --k 2 --m 1` (docs/cluster.md);
a stripefs without it fails those rows with a line naming the fix.

Prints one line per row and phase and `ratio=` lines (row ops/s over
passthrough ops/s; etcd-2 over etcd-1) with the load average; writes
meta.md and meta.csv to --out (default a fresh meta-bench-YYYYmmdd-HHMMSS
dir under the cwd; an existing one is refused) and, with --update-docs, also
to docs/results/meta/. Mounts and daemons are always torn down. Timing only;
no assertion.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lib import passthrough, run, sampling  # noqa: E402
from lib import stripefs as sflib  # noqa: E402

PHASES = ("create", "stat", "rename", "readdir", "unlink")
DIRS = 4


def load():
    return ",".join(f"{x:.2f}" for x in sampling.loadavg())


def measure(roots, files):
    """roots[t] is the bench directory thread t works in (DIRS of them,
    possibly on different mounts of one volume). Returns {phase: ops/s}."""
    per = files // DIRS
    dirs = [os.path.join(roots[t], f"d{t}") for t in range(DIRS)]
    for d in dirs:
        os.mkdir(d)

    def create(t):
        for i in range(per):
            os.close(os.open(os.path.join(dirs[t], f"f{i}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def stat(t):
        for i in range(per):
            os.stat(os.path.join(dirs[t], f"f{i}"))

    def rename(t):
        # Into the next directory through the same mount (cross-directory).
        nxt = os.path.join(roots[t], f"d{(t + 1) % DIRS}")
        if not os.path.isdir(nxt):
            nxt = dirs[t]
        for i in range(per):
            os.rename(os.path.join(dirs[t], f"f{i}"),
                      os.path.join(nxt, f"r{t}-{i}"))

    listed = [0] * DIRS  # entries listed per thread

    def readdir(t):
        for _ in range(3):
            listed[t] += len(os.listdir(dirs[t]))

    def unlink(t):
        for name in os.listdir(dirs[t]):
            os.unlink(os.path.join(dirs[t], name))

    out = {}
    for phase, fn in (("create", create), ("stat", stat), ("rename", rename),
                      ("readdir", readdir), ("unlink", unlink)):
        elapsed = run.threads_timed(DIRS, fn)
        ops = sum(listed) if phase == "readdir" else per * DIRS
        out[phase] = ops / elapsed
    return out


def has_etcd_launcher(sf):
    r = sf.run("cluster", "up", "--help", check=False)
    return "--meta-engine" in (r.stdout + r.stderr)


def etcd_cluster_cli(sf, work, metads):
    """`stripefs cluster up --meta-engine etcd`: returns (metad addresses,
    key, teardown)."""
    cdir = os.path.join(work, "cluster")
    sf.run("cluster", "up", "--dir", cdir, "--servers", 3, "--k", 2, "--m", 1,
           "--meta-engine", "etcd", "--etcd-members", 3, "--metads", metads,
           timeout=300)
    with open(os.path.join(cdir, "metad.addr")) as f:
        addrs = [a.strip() for a in f if a.strip()]
    return addrs, os.path.join(cdir, "cluster.key"), \
        lambda: sf.run("cluster", "down", "--dir", cdir, check=False,
                       timeout=120)


def mount_and_measure(sf, work, files, kind, log, use_cli):
    """Mounts the row's volume, measures, tears everything down."""
    mnts, teardown = [], []
    try:
        if kind == "embedded":
            mnt = os.path.join(work, "mnt0")
            os.mkdir(mnt)
            sf.mount(os.path.join(work, "vol"), mnt)
            mnts.append(mnt)
        else:
            if kind == "metad":
                c = sflib.Cluster(sf, os.path.join(work, "cluster"))
                teardown.append(c.down)
                c.up(3, 2, 1, 65536)
                addrs, key = [c.meta], c.key
            else:
                n = 2 if kind == "etcd-2" else 1
                if not use_cli:
                    raise RuntimeError(
                        "this stripefs has no `cluster up --meta-engine "
                        "etcd`: build the current tree")
                addrs, key, down = etcd_cluster_cli(sf, work, n)
                teardown.append(down)
            for i, a in enumerate(addrs):
                mnt = os.path.join(work, f"mnt{i}")
                os.mkdir(mnt)
                sf.mount("--meta", a, "--key", key, mnt)
                mnts.append(mnt)
        roots = []
        for i, m in enumerate(mnts):
            os.mkdir(os.path.join(m, f"bench{i}"))
        # Thread t works through mount t * len(mnts) // DIRS.
        for t in range(DIRS):
            roots.append(os.path.join(mnts[t * len(mnts) // DIRS],
                                      f"bench{t * len(mnts) // DIRS}"))
        return measure(roots, files)
    finally:
        for m in mnts:
            sf.umount(m)
        for t in reversed(teardown):
            t()


def passthrough_row(work, files, log):
    exe = passthrough.build(work, log)
    if exe is None:
        return None
    src = os.path.join(work, "tmpfs")
    os.mkdir(src)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", src],
                   check=True)
    try:
        with passthrough.Passthrough(exe, src, os.path.join(work, "pt")) as p:
            os.mkdir(os.path.join(p.mnt, "bench"))
            return measure([os.path.join(p.mnt, "bench")] * DIRS, files)
    finally:
        subprocess.run(["umount", src], check=False)


def table(results, files, load_start, load_end, note):
    rows = [r for r in ("passthrough", "embedded", "metad", "etcd-1",
                        "etcd-2") if r in results]
    lines = ["| row | " + " | ".join(f"{p}/s" for p in PHASES) + " |",
             "|---|" + "---|" * len(PHASES)]
    for r in rows:
        lines.append(f"| {r} | " + " | ".join(
            run.fmtn(results[r][p]) for p in PHASES) + " |")
    lines.append("")
    lines.append(f"{files} files in {DIRS} directories (one thread each); "
                 f"load average {load_start} at start, {load_end} at end. "
                 f"{note}")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2000 files")
    p.add_argument("--files", type=int, default=None,
                   help="files over the 4 directories (default 10000)")
    p.add_argument("--stripefs", help="stripefs binary (default: found)")
    p.add_argument("--rows", default="passthrough,embedded,metad,etcd-1,"
                   "etcd-2", help="comma list of rows to run")
    p.add_argument("--out", help="result directory (default: a fresh "
                   "meta-bench-YYYYmmdd-HHMMSS directory under the cwd)")
    p.add_argument("--update-docs", action="store_true",
                   help="also write docs/results/meta/")
    a = p.parse_args()
    files = a.files or (2000 if a.quick else 10000)
    run.require_mount_host("bench meta", "mounting tmpfs and FUSE")
    sf = sflib.Stripefs(sflib.require_binary("bench meta", a.stripefs))
    log = run.Log()
    run.raise_on_signals()
    out = a.out or run.fresh_out("meta-bench", "bench meta")
    os.makedirs(out, exist_ok=True)
    use_cli = has_etcd_launcher(sf)
    note = ("etcd rows: `stripefs cluster up --meta-engine etcd "
            "--etcd-members 3 --metads N`; metad row: `stripefs cluster up`, "
            "both with 3 chunkd, k+m 2+1.")
    load_start = load()
    results = {}
    for kind in a.rows.split(","):
        work = tempfile.mkdtemp(prefix=f"stripefs-bm-{kind}-")
        try:
            if kind == "passthrough":
                r = passthrough_row(work, files, log)
                if r is None:
                    continue
            else:
                r = mount_and_measure(sf, work, files, kind, log, use_cli)
            results[kind] = r
            print(f"{kind} " + " ".join(
                f"{ph}/s={r[ph]:.0f}" for ph in PHASES) +
                f" files={files} load={load()}", flush=True)
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print(f"{kind} FAILED: {e}", flush=True)
        finally:
            run.remove_work(work, log)
    load_end = load()
    ref = results.get("passthrough")
    for kind, r in results.items():
        if kind == "passthrough" or ref is None:
            continue
        for ph in PHASES:
            print(f"{kind}/passthrough {ph} ratio={r[ph] / ref[ph]:.3f} "
                  f"load={load_end}")
    if "etcd-1" in results and "etcd-2" in results:
        for ph in PHASES:
            print(f"etcd-2/etcd-1 {ph} ratio="
                  f"{results['etcd-2'][ph] / results['etcd-1'][ph]:.3f} "
                  f"load={load_end}")
    md = table(results, files, load_start, load_end, note)
    with open(os.path.join(out, "meta.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "meta.csv"), "w") as f:
        f.write("row," + ",".join(PHASES) + "\n")
        for kind, r in results.items():
            f.write(kind + "," + ",".join(f"{r[ph]:.1f}" for ph in PHASES) +
                    "\n")
    if a.update_docs:
        dst = os.path.join(sflib.ROOT, "docs", "results", "meta")
        os.makedirs(dst, exist_ok=True)
        shutil.copy(os.path.join(out, "meta.md"), dst)
        shutil.copy(os.path.join(out, "meta.csv"), dst)
    print(md)
    print(f"results in {out}")


if __name__ == "__main__":
    main()
