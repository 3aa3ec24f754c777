"""Counting file syncs (fsync/fdatasync, also those io_uring issues) per
process with perf.

SyncCounter records the tracepoint ext4:ext4_sync_file_enter system-wide
with `perf record -a` while a job runs, then keeps the events whose process
(tgid) is one of ours: io_uring workers and RocksDB's threads belong to the
process that owns them, so every sync a chunkd, metad or mount daemon makes
on an ext4 file counts. Only ext4 is seen (the bench work dir's file system
here); on another file system, or without perf, stop() returns None and the
driver says "not counted".
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

EVENT = "ext4:ext4_sync_file_enter"


class SyncCounter:
    def __init__(self, log=print):
        self.log = log
        self.proc = None
        self.data = None

    def start(self):
        if not shutil.which("perf"):
            self.log("syncs not counted: no perf")
            return self
        fd, self.data = tempfile.mkstemp(prefix="stripefs-syncs-",
                                         suffix=".data")
        os.close(fd)
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-a", "-e", EVENT, "-o", self.data],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf needs a moment to enable the event
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace").strip()
            self.log(f"syncs not counted: perf record failed: {err[-200:]}")
            self.proc = None
        return self

    def stop(self, pids):
        """{name: syncs} for the processes in `pids` ({name: pid}), or None
        when nothing was recorded."""
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
        r = subprocess.run(["perf", "script", "-i", self.data, "-F", "pid"],
                           capture_output=True, text=True, timeout=120)
        self._cleanup()
        if r.returncode != 0:
            self.log(f"syncs not counted: perf script failed: "
                     f"{r.stderr.strip()[-200:]}")
            return None
        by_pid = {}
        for line in r.stdout.split():
            if line.isdigit():
                by_pid[int(line)] = by_pid.get(int(line), 0) + 1
        return {n: by_pid.get(p, 0) for n, p in pids.items()}

    def _cleanup(self):
        if self.data and os.path.exists(self.data):
            os.unlink(self.data)
        self.data = None
