#!/usr/bin/env python3
"""Creates and unlinks per second through a stripefs mount.

Mounts a fresh volume with the given `stripefs` binary (an embedded volume,
or a local N-server cluster with --cluster), runs THREADS threads that each
create FILES/THREADS empty files in their own directory (open O_CREAT, close)
and then unlink them all, and prints one line per phase:

  <label> creates/s=... unlinks/s=... files=... threads=... load=1m,5m,15m

With two binaries (--before and --after) both run in one invocation, one
after the other, and a `ratio=` line compares them. The mount and cluster are
always torn down (finally block). Timing only; no assertion.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lib import run  # noqa: E402


def loadavg():
    with open("/proc/loadavg") as f:
        return ",".join(f.read().split()[:3])


def run_phase(root, files, threads, fn):
    per = files // threads

    def worker(t):
        d = os.path.join(root, f"d{t}")
        for i in range(per):
            fn(os.path.join(d, f"f{i}"))

    return per * threads / run.threads_timed(threads, worker)


def create(path):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))


def measure(mnt, files, threads):
    root = os.path.join(mnt, "bench")
    os.mkdir(root)
    for t in range(threads):
        os.mkdir(os.path.join(root, f"d{t}"))
    creates = run_phase(root, files, threads, create)
    unlinks = run_phase(root, files, threads, os.unlink)
    return creates, unlinks


def with_mount(sf, work, cluster, servers, body):
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    cdir = os.path.join(work, "cluster")
    mounted = up = False
    try:
        if cluster:
            subprocess.run([sf, "cluster", "up", "--dir", cdir, "--servers",
                            str(servers)], check=True, capture_output=True,
                           text=True, timeout=120)
            up = True
            addr = os.path.join(cdir, "metad.addr")
            if not os.path.exists(addr):
                raise RuntimeError(f"no metad.addr in {cdir}: " +
                                   " ".join(sorted(os.listdir(cdir))))
            meta = open(addr).read().strip()
            args = [sf, "mount"]
            args += ["--meta", meta, "--key", os.path.join(cdir, "cluster.key"),
                     mnt]
        else:
            args = [sf, "mount", os.path.join(work, "vol"), mnt]
        subprocess.run(args, check=True, capture_output=True, text=True,
                       timeout=120)
        mounted = True
        return body(mnt)
    finally:
        if mounted:
            r = subprocess.run([sf, "umount", mnt], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", mnt])
        if up:
            subprocess.run([sf, "cluster", "down", "--dir", cdir],
                           capture_output=True, timeout=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", help="stripefs binary of the baseline")
    p.add_argument("--after", required=True, help="stripefs binary measured")
    p.add_argument("--files", type=int, default=2000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--cluster", action="store_true",
                   help="a local cluster instead of an embedded volume")
    p.add_argument("--servers", type=int, default=6)
    p.add_argument("--workdir", default=None,
                   help="parent of the scratch directory (default: /tmp)")
    a = p.parse_args()
    kind = f"cluster{a.servers}" if a.cluster else "embedded"
    results = {}
    for label, sf in (("before", a.before), ("after", a.after)):
        if sf is None:
            continue
        work = tempfile.mkdtemp(prefix="stripefs-cu-", dir=a.workdir)
        try:
            c, u = with_mount(sf, work, a.cluster, a.servers,
                              lambda mnt: measure(mnt, a.files, a.threads))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results[label] = (c, u)
        print(f"{kind} {label} creates/s={c:.0f} unlinks/s={u:.0f} "
              f"files={a.files} threads={a.threads} load={loadavg()}",
              flush=True)
    if "before" in results:
        (cb, ub), (ca, ua) = results["before"], results["after"]
        print(f"{kind} after/before creates ratio={ca / cb:.2f} "
              f"unlinks ratio={ua / ub:.2f} load={loadavg()}")


if __name__ == "__main__":
    main()
