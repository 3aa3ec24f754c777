"""Process plumbing of a benchmark run: a logger with elapsed seconds,
signals that unwind through the driver's finally blocks, mount checks,
removal of the run's work dir and the default results directory."""
import datetime
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time

from lib import sampling


class Log:
    """Callable logger: `log(msg)` prints "[  12.3s] msg" (flushed)."""

    def __init__(self, t0=None):
        self.t0 = t0 if t0 is not None else time.time()

    def __call__(self, msg):
        print(f"[{time.time() - self.t0:6.1f}s] {msg}", flush=True)


def raise_on_signals():
    """SIGTERM, SIGINT and SIGHUP raise KeyboardInterrupt, so teardown in
    finally blocks runs (unmount, stop daemons, restore knobs)."""
    def on_signal(signum, frame):
        raise KeyboardInterrupt
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)


def mounts_under(prefix):
    """Mount points equal to or below `prefix`."""
    prefix = prefix.rstrip("/")
    with open("/proc/mounts") as f:
        points = [ln.split()[1] for ln in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def is_mounted(path):
    with open("/proc/mounts") as f:
        return any(ln.split()[1] == path for ln in f)


def remove_work(work, log=print):
    """Removes `work`, unless something under it is still mounted (then it
    is kept and a warning logged: never recurse into a live mount)."""
    busy = mounts_under(work)
    if busy:
        log(f"warning: still mounted, {work} kept: {busy}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def fresh_out(prefix, driver):
    """The default --out of a driver: a fresh PREFIX-YYYYmmdd-HHMMSS
    directory under the current one (absolute path, not created yet). Exits
    when it already exists: a run never writes into an old one unless that
    is given with --out."""
    out = os.path.abspath(time.strftime(f"{prefix}-%Y%m%d-%H%M%S"))
    if os.path.exists(out):
        sys.exit(f"{driver}: {out} exists; pass --out DIR")
    return out


def wait_until(pred, seconds, step=0.05):
    """Polls pred() until true or `seconds` passed; returns the last value."""
    deadline = time.time() + seconds
    while True:
        v = pred()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def guarded(body, teardown, log):
    """Runs body(), then teardown() always; returns the exit code: 0, 130
    when interrupted (Ctrl-C or a signal from raise_on_signals()), 1 on an
    error (logged: the driver still writes the rows it has)."""
    rc = 0
    try:
        body()
    except KeyboardInterrupt:
        log("interrupted; tearing down")
        rc = 130
    except Exception as e:
        log(f"error: {e}")
        rc = 1
    finally:
        teardown()
    return rc


def require_mount_host(driver, why_root):
    """Exits with one line naming the fix unless this host can run a
    benchmark that mounts: root (`why_root` says for what), fio, /dev/fuse."""
    if os.geteuid() != 0:
        sys.exit(f"{driver}: must run as root ({why_root})")
    if not shutil.which("fio"):
        sys.exit(f"{driver}: fio not found (apt-get install fio)")
    if not os.path.exists("/dev/fuse"):
        sys.exit(f"{driver}: no /dev/fuse")


def timed(bench, meta):
    """Runs bench.run() guarded by bench.teardown(); records loadavg_end,
    wall_s and complete in `meta`. Returns the exit code of guarded()."""
    t0 = time.time()
    rc = guarded(bench.run, bench.teardown, bench.log)
    meta["loadavg_end"] = sampling.loadavg()
    meta["wall_s"] = round(time.time() - t0, 1)
    meta["complete"] = rc == 0
    return rc


def summary(name, quick, meta):
    """The closing line's head: which bench, the load before and after, the
    wall time."""
    return (f"\n{name} bench{' (quick)' if quick else ''}: load "
            f"{meta['loadavg_start'][0]} -> {meta['loadavg_end'][0]}, "
            f"{meta['wall_s']:.0f} s")


def host_meta():
    """What every results file records about the run's machine and time."""
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"),
            "host": platform.node(), "kernel": platform.release(),
            "cpus": os.cpu_count(), "loadavg_start": sampling.loadavg()}


def git_commit(root):
    """Short commit of the checkout at `root`, +dirty with changes; None
    outside a git checkout."""
    r = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain",
                            "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (r.stdout.strip() + ("+dirty" if dirty else "")) or None


def fmtn(v):
    """A figure for a table: '-' for None, 3 significant digits or so."""
    if v is None:
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def add_size_args(parser, sizes, quick_help):
    """--quick and one --NAME option per (name, full, quick, what) of
    `sizes`; resolve_sizes() fills in the defaults after parsing."""
    parser.add_argument("--quick", action="store_true", help=quick_help)
    for name, full, quick, what in sizes:
        parser.add_argument("--" + name.replace("_", "-"), type=int,
                            default=None,
                            help=f"{what} (default {full}; quick {quick})")


def resolve_sizes(args, sizes):
    """Sizes not given on the command line: the full or the quick value."""
    for name, full, quick, _ in sizes:
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def threads_timed(n, fn):
    """Runs fn(t) for t in 0..n-1 on n threads at once; returns the wall
    seconds. An OSError in a thread is reported (RuntimeError naming up to
    three), never hidden."""
    errors = []

    def wrap(t):
        try:
            fn(t)
        except OSError as e:
            errors.append(f"thread {t}: {e}")

    ts = [threading.Thread(target=wrap, args=(t,)) for t in range(n)]
    start = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - start
    if errors:
        raise RuntimeError("; ".join(errors[:3]))
    return elapsed
