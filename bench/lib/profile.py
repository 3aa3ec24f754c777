"""A flat CPU profile of some processes with perf, while a job runs.

Profiler(pids).start() runs `perf record -F 199 -p PID,...` (no call
graphs: the release build has no frame pointers, and a flat profile is
what says where the CPU goes); stop() returns the top of `perf report`
sorted by process name and symbol (share of all samples), or None when perf
is missing or failed. Threads a process starts after start() are not
followed.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time


class Profiler:
    def __init__(self, pids, log=print, freq=199):
        self.pids = [p for p in pids if p]
        self.log, self.freq = log, freq
        self.proc = None
        self.data = None

    def start(self):
        if not shutil.which("perf") or not self.pids:
            self.log("no profile: no perf or no process")
            return self
        fd, self.data = tempfile.mkstemp(prefix="stripefs-prof-",
                                         suffix=".data")
        os.close(fd)
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-F", str(self.freq), "-p",
             ",".join(str(p) for p in self.pids), "-o", self.data],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip()
            self.log(f"no profile: perf record failed: {err[-200:]}")
            self.proc = None
        return self

    def stop(self, top=40):
        """The first `top` rows of the report (text), or None."""
        if self.proc is None:
            self._cleanup()
            return None
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        r = subprocess.run(["perf", "report", "-i", self.data, "--stdio",
                            "--no-children", "--sort", "comm,dso,sym",
                            "--percent-limit", "0.5"],
                           capture_output=True, text=True, timeout=300)
        self._cleanup()
        if r.returncode != 0:
            self.log(f"no profile: perf report failed: "
                     f"{r.stderr.strip()[-200:]}")
            return None
        lines = [ln for ln in r.stdout.splitlines()
                 if ln.strip() and not ln.startswith("#")]
        head = [ln for ln in r.stdout.splitlines()
                if ln.startswith("# Samples") or
                ln.startswith("# Event count")]
        return "\n".join(head + lines[:top])

    def _cleanup(self):
        if self.data and os.path.exists(self.data):
            os.unlink(self.data)
        self.data = None
