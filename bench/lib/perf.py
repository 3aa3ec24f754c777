"""perf while a job runs: file syncs per process, and flat CPU profiles.

Recording runs `perf record` in the background between start() and stop();
stop() stops it (SIGINT, bounded wait) and hands the data file to a reader.
When perf is missing or fails, stop() returns None and the driver says "not
counted" / "no profile" (logged, never raised).

SyncCounter records the tracepoint ext4:ext4_sync_file_enter system-wide
(`perf record -a`) and keeps the events whose process (tgid) is one of ours:
io_uring workers and RocksDB's threads belong to the process that owns
them, so every sync a chunkd, metad or mount daemon makes on an ext4 file
counts. Only ext4 is seen (the bench work dir's file system here).

Profiler samples some processes (`perf record -F 199 -p PID,...`, no call
graphs: the release build has no frame pointers, and a flat profile is what
says where the CPU goes) and returns the top of `perf report` by process
and symbol. Threads a process starts after start() are not followed.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

SYNC_EVENT = "ext4:ext4_sync_file_enter"


class Recording:
    def __init__(self, record_args, log=print):
        self.args, self.log = record_args, log
        self.proc = None
        self.data = None

    def start(self):
        if not shutil.which("perf"):
            self.log("perf not found: nothing recorded")
            return self
        fd, self.data = tempfile.mkstemp(prefix="stripefs-perf-",
                                         suffix=".data")
        os.close(fd)
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-o", self.data] + self.args,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf needs a moment to enable its events
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip()
            self.log(f"perf record failed: {err[-200:]}")
            self.proc = None
        return self

    def stop(self, *read_argvs):
        """Runs `perf READ_ARGV -i DATA` for each; returns the list of their
        stdouts, or None."""
        try:
            if self.proc is None:
                return None
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            outs = []
            for argv in read_argvs:
                r = subprocess.run(["perf"] + argv + ["-i", self.data],
                                   capture_output=True, text=True,
                                   timeout=300)
                if r.returncode != 0:
                    self.log(f"perf {argv[0]} failed: "
                             f"{r.stderr.strip()[-200:]}")
                    return None
                outs.append(r.stdout)
            return outs
        finally:
            if self.data and os.path.exists(self.data):
                os.unlink(self.data)
            self.data = None


class SyncCounter:
    def __init__(self, log=print):
        self.rec = Recording(["-a", "-e", SYNC_EVENT], log)

    def start(self):
        self.rec.start()
        return self

    def stop(self, pids):
        """{name: syncs} for the processes in `pids` ({name: pid}), or None
        when nothing was recorded."""
        out = self.rec.stop(["script", "-F", "pid"])
        if out is None:
            return None
        by_pid = {}
        for word in out[0].split():
            if word.isdigit():
                by_pid[int(word)] = by_pid.get(int(word), 0) + 1
        return {n: by_pid.get(p, 0) for n, p in pids.items()}


class Profiler:
    """`pids` maps a name (chunkd.1, metad, ...) to a pid. The report groups
    samples by process group (the name up to its first dot: chunkd.3 ->
    chunkd), since they all run the same stripefs binary and perf's own
    "pid" key is a thread id."""

    def __init__(self, pids, log=print, freq=499):
        self.groups = {p: n.split(".")[0] for n, p in pids.items() if p}
        self.rec = Recording(["-F", str(freq), "-p",
                              ",".join(str(p) for p in self.groups)], log)

    def start(self):
        self.rec.start()
        return self

    def stop(self, top=25):
        """Text: the share of samples per process group and library, then
        the top `top` symbols over all processes; None when nothing was
        recorded."""
        out = self.rec.stop(["script", "-F", "pid,tid,ip,sym,dso"])
        if out is None:
            return None
        by_lib, by_sym, total = {}, {}, 0
        for line in out[0].splitlines():
            # "PID/TID  IP SYMBOL (DSO)"
            words = line.split()
            if len(words) < 3 or "/" not in words[0]:
                continue
            pid = int(words[0].split("/")[0])
            dso = words[-1].strip("()").rsplit("/", 1)[-1]
            sym = " ".join(words[2:-1]) or "[unknown]"
            key = (self.groups.get(pid, str(pid)), dso)
            by_lib[key] = by_lib.get(key, 0) + 1
            by_sym[(dso, sym)] = by_sym.get((dso, sym), 0) + 1
            total += 1
        if not total:
            return None

        def table(counts, n):
            rows = sorted(counts.items(), key=lambda kv: -kv[1])[:n]
            return [f"{100.0 * c / total:6.2f}%  " + "  ".join(k)
                    for k, c in rows]
        return "\n".join([f"{total} samples", "", "by process and library:"]
                         + table(by_lib, top) +
                         ["", f"top {top} symbols, all processes:"] +
                         table(by_sym, top))
