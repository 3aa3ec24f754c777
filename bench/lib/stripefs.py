"""The stripefs binary as the drivers use it: found, run, mounted, stat'ed.

Stripefs(binary).run(...) raises RuntimeError with the command's output on
a non-zero exit unless check=False. mount() returns the daemon's pid, parsed
from the "(pid N)" of the mount banner (None if absent). umount() falls back
to `umount -l` when the clean unmount fails, so teardown never leaves a mount
behind.
"""
import json
import os
import re
import shutil
import subprocess
import sys

from lib import run as runlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def find_binary(explicit=None):
    """explicit, $STRIPEFS_BIN, ROOT/build/tools/stripefs or PATH."""
    for cand in (explicit, os.environ.get("STRIPEFS_BIN"),
                 os.path.join(ROOT, "build", "tools", "stripefs")):
        if cand and os.path.exists(cand):
            return cand
    return shutil.which("stripefs")


def require_binary(driver, explicit=None):
    """find_binary(), or exit with one line naming the fix."""
    found = find_binary(explicit)
    if not found:
        sys.exit(f"{driver}: stripefs binary not found; pass --stripefs")
    return found


class Stripefs:
    def __init__(self, binary):
        self.binary = binary

    def run(self, *argv, check=True, timeout=120):
        cmd = [self.binary] + [str(a) for a in argv]
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): "
                               f"{r.stderr.strip()} {r.stdout.strip()}")
        return r

    def mount(self, *argv, timeout=120):
        """`stripefs mount ARGV`; returns (daemon pid or None, banner)."""
        r = self.run("mount", *argv, timeout=timeout)
        banner = (r.stdout + r.stderr).strip()
        m = re.search(r"\(pid (\d+)\)", banner)
        return (int(m.group(1)) if m else None), banner

    def umount(self, mnt):
        r = self.run("umount", mnt, check=False)
        if r.returncode != 0 and runlib.is_mounted(mnt):
            subprocess.run(["umount", "-l", mnt], check=False)

    def stat(self, mnt):
        """`stripefs stat MNT --json` as a dict ({} when unreadable)."""
        r = self.run("stat", mnt, "--json", check=False)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}


class Cluster:
    """A loopback cluster made by `stripefs cluster up --dir DIR`.

    up() starts metad and `servers` chunkd; down() stops them (SIGTERM, then
    SIGKILL after the CLI's bounded wait) and is safe to call twice.
    """

    def __init__(self, sf, cdir):
        self.sf, self.dir = sf, cdir
        self.meta = None
        self.key = os.path.join(cdir, "cluster.key")
        self.running = False

    def up(self, servers, k, m, cell_size, extra=()):
        """`extra`: more `cluster up` arguments (e.g. --netns --link-rate
        1gbit)."""
        self.sf.run("cluster", "up", "--servers", servers, "--dir", self.dir,
                    "--k", k, "--m", m, "--cell-size", cell_size, *extra)
        self.running = True
        with open(os.path.join(self.dir, "metad.addr")) as f:
            self.meta = f.read().strip()
        return self

    def mount_args(self):
        """The `stripefs mount` arguments that name this cluster."""
        return ["--meta", self.meta, "--key", self.key]

    def down(self):
        if self.running:
            self.sf.run("cluster", "down", "--dir", self.dir, check=False)
            self.running = False

    def pids(self):
        """{"metad": pid, "chunkd.1": pid, ...} from DIR/*.pid."""
        out = {}
        if not os.path.isdir(self.dir):
            return out
        for fn in sorted(os.listdir(self.dir)):
            if fn.endswith(".pid"):
                try:
                    with open(os.path.join(self.dir, fn)) as f:
                        out[fn[:-4]] = int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    pass
        return out
