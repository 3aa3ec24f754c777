#!/usr/bin/env python3
"""Metadata operations per second: stripefs engines vs passthrough_ll.

`stripefs bench meta [--quick] [--files N] [--threads 1,4] [--rounds N]
[--rows ...] [--out DIR] [--update-docs]`

For each thread count T (default 1 and 4) it makes FILES empty files over T
directories (thread t works in its own directory d{t}) and times six
phases through a mount: create (open O_CREAT|O_EXCL, close), stat, link
(a second name for each file, same directory), rename (each file to a new
name in the thread's second directory e{t}), readdir (every directory
listed 3 times) and unlink (every name: 2 x FILES). Then the lock-file
loop of mail and package tools, one thread: ROUNDS times link a file to
`lock`, rename `lock` to `held`, unlink `held` (lockfile/s = rounds/s).
Rows, all in one run:

  passthrough  libfuse's passthrough_ll over a tmpfs directory (reference)
  embedded     `stripefs mount DIR MNT`: MetaStore on RocksDB in process
  metad        `stripefs cluster up`: one metad (RocksDB), 3 chunkd
  etcd-1       one metad on a 3-member etcd cluster, one mount
  etcd-2       two metads on the same etcd volume, two mounts (one per
               metad), each running half of the directories

The etcd rows come from `stripefs cluster up --meta-engine etcd
--etcd-members 3 --metads N --servers 3 --k 2 --m 1` (docs/cluster.md);
a stripefs without it fails those rows with a line naming the fix.

Prints one line per row and thread count and `ratio=` lines (row ops/s
over passthrough ops/s at the same thread count; etcd-2 over etcd-1) with
the load average; writes meta.md and meta.csv to --out (default a fresh
meta-bench-YYYYmmdd-HHMMSS dir under the cwd; an existing one is refused)
and, with --update-docs, also to docs/results/meta/. Mounts and daemons
are always torn down. Timing only; no assertion.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lib import passthrough, run, sampling  # noqa: E402
from lib import stripefs as sflib  # noqa: E402

PHASES = ("create", "stat", "link", "rename", "readdir", "unlink")
LOCK_PHASE = "lockfile"


def load():
    return ",".join(f"{x:.2f}" for x in sampling.loadavg())


def measure(roots, files, threads):
    """roots[t] is the bench directory thread t works in (`threads` of them,
    possibly on different mounts of one volume). Returns {phase: ops/s}."""
    per = files // threads
    dirs = [os.path.join(roots[t], f"d{t}") for t in range(threads)]
    targets = [os.path.join(roots[t], f"e{t}") for t in range(threads)]
    for d in dirs + targets:
        os.mkdir(d)

    def create(t):
        for i in range(per):
            os.close(os.open(os.path.join(dirs[t], f"f{i}"),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def stat(t):
        for i in range(per):
            os.stat(os.path.join(dirs[t], f"f{i}"))

    def link(t):
        for i in range(per):
            os.link(os.path.join(dirs[t], f"f{i}"),
                    os.path.join(dirs[t], f"l{i}"))

    def rename(t):
        # Into the thread's second directory (cross-directory).
        for i in range(per):
            os.rename(os.path.join(dirs[t], f"f{i}"),
                      os.path.join(targets[t], f"r{i}"))

    listed = [0] * threads  # entries listed per thread
    removed = [0] * threads

    def readdir(t):
        for _ in range(3):
            listed[t] += len(os.listdir(dirs[t])) + len(os.listdir(targets[t]))

    def unlink(t):
        for d in (dirs[t], targets[t]):
            for name in os.listdir(d):
                os.unlink(os.path.join(d, name))
                removed[t] += 1

    out = {}
    for phase, fn in (("create", create), ("stat", stat), ("link", link),
                      ("rename", rename), ("readdir", readdir),
                      ("unlink", unlink)):
        elapsed = run.threads_timed(threads, fn)
        ops = {"readdir": sum(listed), "unlink": sum(removed)}.get(
            phase, per * threads)
        out[phase] = ops / elapsed
    for d in dirs + targets:
        os.rmdir(d)
    return out


def lockfile_loop(root, rounds):
    """link, rename, unlink of a lock name, `rounds` times; rounds/s."""
    d = os.path.join(root, "lock")
    os.mkdir(d)
    base, lock, held = (os.path.join(d, n) for n in ("base", "lock", "held"))
    os.close(os.open(base, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))

    def loop(_):
        for _ in range(rounds):
            os.link(base, lock)
            os.rename(lock, held)
            os.unlink(held)

    rate = rounds / run.threads_timed(1, loop)
    os.unlink(base)
    os.rmdir(d)
    return rate


def measure_all(roots_for, files, threads_list, rounds):
    """roots_for(T) gives the T thread roots. {(phase, T): ops/s}, with the
    lock-file loop as (LOCK_PHASE, 1)."""
    out = {}
    for n in threads_list:
        for ph, v in measure(roots_for(n), files, n).items():
            out[(ph, n)] = v
    out[(LOCK_PHASE, 1)] = lockfile_loop(roots_for(1)[0], rounds)
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


def mount_and_measure(sf, work, files, threads_list, rounds, kind, log,
                      use_cli):
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
        for i, m in enumerate(mnts):
            os.mkdir(os.path.join(m, f"bench{i}"))

        def roots_for(n):
            # Thread t works through mount t * len(mnts) // n.
            return [os.path.join(mnts[t * len(mnts) // n],
                                 f"bench{t * len(mnts) // n}")
                    for t in range(n)]
        return measure_all(roots_for, files, threads_list, rounds)
    finally:
        for m in mnts:
            sf.umount(m)
        for t in reversed(teardown):
            t()


def passthrough_row(work, files, threads_list, rounds, log):
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
            root = os.path.join(p.mnt, "bench")
            return measure_all(lambda n: [root] * n, files, threads_list,
                               rounds)
    finally:
        subprocess.run(["umount", src], check=False)


def columns(threads_list):
    """(phase, threads) columns: every phase per thread count, then the
    lock-file loop."""
    return [(ph, n) for n in threads_list for ph in PHASES] + \
        [(LOCK_PHASE, 1)]


def col_name(col):
    ph, n = col
    return ph if ph == LOCK_PHASE else f"{ph}@{n}t"


def table(results, cols, files, rounds, head):
    rows = [r for r in ("passthrough", "embedded", "metad", "etcd-1",
                        "etcd-2") if r in results]
    lines = ["| row | " + " | ".join(f"{col_name(c)}/s" for c in cols) +
             " |", "|---|" + "---|" * len(cols)]
    for r in rows:
        lines.append(f"| {r} | " + " | ".join(
            run.fmtn(results[r][c]) for c in cols) + " |")
    ref = results.get("passthrough")
    for r in rows:
        if r == "passthrough" or ref is None:
            continue
        lines.append(f"| {r} / passthrough | " + " | ".join(
            f"{results[r][c] / ref[c]:.2f}" for c in cols) + " |")
    lines.append("")
    lines.append(f"{files} files over T directories (T threads, one "
                 f"directory each), lock-file loop {rounds} rounds, one "
                 f"thread. {head}")
    return "\n".join(lines) + "\n"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="2000 files, 2000 lock-file rounds")
    p.add_argument("--files", type=int, default=None,
                   help="files per thread count (default 10000)")
    p.add_argument("--threads", default="1,4",
                   help="comma list of thread counts (default 1,4)")
    p.add_argument("--rounds", type=int, default=None,
                   help="lock-file loop rounds (default 10000)")
    p.add_argument("--stripefs", help="stripefs binary (default: found)")
    p.add_argument("--rows", default="passthrough,embedded,metad,etcd-1,"
                   "etcd-2", help="comma list of rows to run")
    p.add_argument("--out", help="result directory (default: a fresh "
                   "meta-bench-YYYYmmdd-HHMMSS directory under the cwd)")
    p.add_argument("--update-docs", action="store_true",
                   help="also write docs/results/meta/")
    return p.parse_args()


def commit_of():
    """The source tree's commit (with -dirty when it has changes)."""
    r = subprocess.run(["git", "-C", sflib.ROOT, "describe", "--always",
                        "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main():
    a = parse_args()
    files = a.files or (2000 if a.quick else 10000)
    rounds = a.rounds or (2000 if a.quick else 10000)
    threads_list = [int(x) for x in a.threads.split(",")]
    cols = columns(threads_list)
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
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results = {}
    for kind in a.rows.split(","):
        work = tempfile.mkdtemp(prefix=f"stripefs-bm-{kind}-")
        try:
            if kind == "passthrough":
                r = passthrough_row(work, files, threads_list, rounds, log)
                if r is None:
                    continue
            else:
                r = mount_and_measure(sf, work, files, threads_list, rounds,
                                      kind, log, use_cli)
            results[kind] = r
            print(f"{kind} " + " ".join(
                f"{col_name(c)}/s={r[c]:.0f}" for c in cols) +
                f" files={files} rounds={rounds} load={load()}", flush=True)
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            print(f"{kind} FAILED: {e}", flush=True)
        finally:
            run.remove_work(work, log)
    load_end = load()
    ref = results.get("passthrough")
    for kind, r in results.items():
        if kind == "passthrough" or ref is None:
            continue
        for c in cols:
            print(f"{kind}/passthrough {col_name(c)} "
                  f"ratio={r[c] / ref[c]:.3f} load={load_end}")
    if "etcd-1" in results and "etcd-2" in results:
        for c in cols:
            print(f"etcd-2/etcd-1 {col_name(c)} ratio="
                  f"{results['etcd-2'][c] / results['etcd-1'][c]:.3f} "
                  f"load={load_end}")
    head = (f"Command: `stripefs bench meta {' '.join(sys.argv[1:])}`; "
            f"started {started}; commit {commit_of()}; load average "
            f"{load_start} at start, {load_end} at end. {note}")
    md = table(results, cols, files, rounds, head)
    with open(os.path.join(out, "meta.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out, "meta.csv"), "w") as f:
        f.write("row," + ",".join(col_name(c) for c in cols) + "\n")
        for kind, r in results.items():
            f.write(kind + "," + ",".join(f"{r[c]:.1f}" for c in cols) +
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
