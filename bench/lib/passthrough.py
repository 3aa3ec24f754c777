"""libfuse3's passthrough_ll example as a reference FUSE file system.

build() compiles /usr/share/doc/libfuse3-dev/examples/passthrough_ll.c with
gcc and pkg-config fuse3 (returns None, logged, when that is impossible:
the driver then leaves its passthrough rows out and says so). Passthrough
mounts it over a source directory (default options: multithreaded,
writeback cache on) and stops it: umount, bounded wait, SIGKILL, lazy
umount as the last resort.
"""
import os
import shutil
import subprocess

from lib import run

SOURCE = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c"


def build(work, log=print):
    """Compiles passthrough_ll into `work`; returns the executable or None."""
    if not os.path.exists(SOURCE) or not shutil.which("gcc"):
        log("passthrough_ll reference left out: no example source or no gcc")
        return None
    exe = os.path.join(work, "passthrough_ll")
    if os.path.exists(exe):
        return exe
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"],
                           capture_output=True, text=True)
    r = subprocess.run(["gcc", "-O2", "-o", exe, SOURCE] +
                       flags.stdout.split(), capture_output=True, text=True)
    if r.returncode != 0:
        log(f"passthrough_ll reference left out: build failed: "
            f"{r.stderr.strip()[-200:]}")
        return None
    return exe


class Passthrough:
    """One passthrough_ll mount of `source` at `mnt`."""

    def __init__(self, exe, source, mnt, options=()):
        """`options`: extra passthrough_ll -o options (e.g. "cache=never")."""
        self.exe, self.source, self.mnt = exe, source, mnt
        self.options = list(options)
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, timeout_s=10):
        os.makedirs(self.mnt, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.exe, "-f", "-o", ",".join([f"source={self.source}"] + self.options),
             self.mnt],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not run.wait_until(lambda: run.is_mounted(self.mnt), timeout_s):
            self.stop()
            raise RuntimeError("passthrough_ll did not mount")
        return self

    def stop(self):
        if self.proc is None:
            return
        subprocess.run(["umount", self.mnt], check=False,
                       capture_output=True)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if run.is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], check=False)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
