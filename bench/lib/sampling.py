"""Load and CPU sampling from /proc: load average, host CPU busy jiffies,
per-process CPU seconds (all threads: utime+stime of /proc/<pid>/stat),
context switches (summed over /proc/<pid>/task/*/status) and peak RSS. Readers return None for a process that is gone."""
import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def loadavg():
    """[1 min, 5 min, 15 min] load average."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def busy_pct(before, after):
    """Host CPU busy % between two cpu_times() samples."""
    return round(100.0 * (after[0] - before[0]) /
                 max(1, after[1] - before[1]), 1)


def proc_cpu_s(pid):
    """CPU seconds (user + system, every thread) of process `pid`."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def proc_ctx_switches(pid):
    """(voluntary, involuntary) context switches summed over the live
    threads of process `pid` (a thread that exited takes its counts with
    it)."""
    vol = invol = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        invol += int(line.split()[1])
        except OSError:
            pass
    return vol, invol


def peak_rss_kib(pid):
    """VmHWM of process `pid` in KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class CpuMeter:
    """CPU seconds spent by a set of processes between start() and stop().

    `pids` maps a name to a pid. Processes that exit in between count with
    what they had at the last sample (none here: the caller keeps them up).
    """

    def __init__(self, pids):
        self.pids = dict(pids)
        self.t0 = {}

    def start(self):
        self.t0 = {n: proc_cpu_s(p) for n, p in self.pids.items()}
        return self

    def stop(self):
        """{name: CPU seconds} for every process that could be read twice."""
        out = {}
        for n, p in self.pids.items():
            c1 = proc_cpu_s(p)
            if c1 is not None and self.t0.get(n) is not None:
                out[n] = round(c1 - self.t0[n], 3)
        return out
