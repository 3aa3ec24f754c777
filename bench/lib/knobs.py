"""Kernel knobs a benchmark changes for its run and must put back.

A Knob remembers the value it found the first time it sets one, and
restore() writes that value back (idempotent; a failure is logged, never
raised, so teardown code can always call it). Use it in a finally block or
as a context manager.
"""
import os

URING = "/sys/module/fuse/parameters/enable_uring"
MAX_PAGES_LIMIT = "/proc/sys/fs/fuse/max_pages_limit"


def read(path):
    """The knob's value, stripped, or None when the kernel has no such knob."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value) + "\n")


class Knob:
    def __init__(self, path, log=print):
        self.path = path
        self.log = log
        self.old = None  # the value before the first set(); None: untouched

    def exists(self):
        return read(self.path) is not None

    def set(self, value):
        """Sets the knob (remembering the first old value). Returns False
        when the kernel has no such knob."""
        cur = read(self.path)
        if cur is None:
            return False
        if self.old is None:
            self.old = cur
        if cur != str(value):
            write(self.path, value)
            self.log(f"{self.path}: {cur} -> {value} (restored at the end)")
        return True

    def restore(self):
        if self.old is None:
            return
        cur = read(self.path)
        if cur != self.old:
            try:
                write(self.path, self.old)
                self.log(f"{self.path} restored to {self.old}")
            except OSError as e:
                self.log(f"warning: could not restore {self.path} to "
                         f"{self.old}: {e}")
        self.old = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()


def drop_caches(log=print):
    """Writes back dirty pages and drops the page cache (needs root)."""
    os.sync()
    try:
        write("/proc/sys/vm/drop_caches", "3")
    except OSError as e:
        log(f"warning: could not drop caches: {e}")
