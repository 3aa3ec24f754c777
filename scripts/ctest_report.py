#!/usr/bin/env python3
"""Summary of the ctest groups of scripts/test.sh, from ctest --output-junit files.

Usage: ctest_report.py GROUP=JUNIT_XML [GROUP=JUNIT_XML ...]
  (GROUP=-: the group could not run at all; counted as a failure)

Prints passed/failed/skipped per group and every skipped test with its reason. Exits 1 if
a group failed or has no tests, or if a test skipped for a reason this script cannot match
to a machine condition, or whose machine condition does not hold here (a skip must describe
the machine, never the product's own result: see SKIP_REASONS).
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
from lib.knobs import URING as FUSE_URING_KNOB, read  # noqa: E402


def io_uring_refused():
    """Asks the kernel itself, as the tests do: io_uring_setup(4, &params)."""
    nr_io_uring_setup = 425  # same number on every architecture
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)  # sizeof(struct io_uring_params)
    fd = libc.syscall(nr_io_uring_setup, 4, params)
    if fd >= 0:
        os.close(fd)
        return False
    return True


def no_static_busybox():
    bb = shutil.which("busybox") or "/bin/busybox"
    if not os.access(bb, os.X_OK):
        return True
    out = subprocess.run(["ldd", bb], capture_output=True, text=True)
    return "not a dynamic" not in out.stdout + out.stderr


def seccomp_unavailable():
    status = read("/proc/self/status") or ""
    return "Seccomp:" not in status


def not_root():
    return os.geteuid() != 0


def no_netem_qdisc():
    """sch_netem neither loaded nor loadable (CONFIG_NET_SCH_NETEM unset)."""
    if os.path.exists("/sys/module/sch_netem"):
        return False
    if shutil.which("modprobe") is None:
        return True  # not loaded, and nothing here could load it
    probe = subprocess.run(["modprobe", "-n", "sch_netem"], capture_output=True)
    return probe.returncode != 0


def not_reachable_by_others(path):
    """Some directory above `path` (or the file) lacks the others' execute bit."""
    path = os.path.abspath(path)
    while True:
        try:
            if not os.stat(path).st_mode & 0o001:
                return True
        except OSError:
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


# (pattern of the skip message, machine condition that makes the skip legitimate, what the
# condition is). The first matching pattern decides; the condition gets the match. A skip
# that matches none fails the run.
SKIP_REASONS = [
    (r"build tree is not reachable by other users: (\S+)",
     lambda m: not_reachable_by_others(m.group(1)), "build tree closed to other users"),
    (r"io_uring_setup fails on this machine|io_uring is disabled on this machine",
     lambda m: io_uring_refused(), "io_uring_setup fails"),
    (r"no FUSE io-uring|without FUSE io-uring",
     lambda m: not os.path.exists(FUSE_URING_KNOB), FUSE_URING_KNOB + " missing"),
    (r"enable_uring is on here",
     lambda m: (read(FUSE_URING_KNOB) or "N") == "Y", "enable_uring is Y"),
    (r"/dev/fuse is missing|no /dev/fuse",
     lambda m: not os.access("/dev/fuse", os.R_OK | os.W_OK), "/dev/fuse not usable"),
    (r"need(s)? root|tests need root|cannot mount tmpfs",
     lambda m: not_root(), "not running as root"),
    (r"qemu-system-x86_64 is not installed",
     lambda m: shutil.which("qemu-system-x86_64") is None, "qemu-system-x86_64 missing"),
    (r"static busybox", lambda m: no_static_busybox(), "no static busybox"),
    (r"fio not installed", lambda m: shutil.which("fio") is None, "fio missing"),
    (r"no python3", lambda m: shutil.which("python3") is None, "python3 missing"),
    (r"cannot install a seccomp filter", lambda m: seccomp_unavailable(), "kernel without seccomp"),
    (r"this kernel has no netem qdisc", lambda m: no_netem_qdisc(), "no sch_netem in this kernel"),
]


def skip_reason(out):
    """The test's own words: gtest prints them after 'Skipped', scripts after 'SKIP:'."""
    m = re.search(r": Skipped\n(.*?)\n\[  SKIPPED \]", out, re.S)
    if m and m.group(1).strip():
        return " ".join(m.group(1).split())
    m = re.search(r"^SKIP: (.*)$", out, re.M)
    return m.group(1).strip() if m else ""


def check_skip(reason):
    """None if the skip is legitimate here, else why not."""
    for pattern, holds, what in SKIP_REASONS:
        m = re.search(pattern, reason)
        if m:
            return None if holds(m) else f"'{what}' does not hold on this machine"
    return "no machine condition known for this reason (teach scripts/ctest_report.py)"


def main(argv):
    bad = []
    rows = []
    skips = []
    for arg in argv:
        group, _, path = arg.partition("=")
        if path == "-" or not os.path.exists(path):
            rows.append((group, 0, 0, 0, "did not run"))
            bad.append(f"{group}: did not run (see the log above)")
            continue
        passed = failed = skipped = 0
        for tc in ET.parse(path).getroot().iter("testcase"):
            status = tc.get("status")
            out = tc.findtext("system-out") or ""
            if status == "run":
                passed += 1
            elif status in ("notrun", "disabled") or tc.find("skipped") is not None:
                skipped += 1
                reason = skip_reason(out)
                why_not = check_skip(reason)
                skips.append((group, tc.get("name"), reason or "(no reason printed)", why_not))
                if why_not:
                    bad.append(f"{group}: {tc.get('name')} skipped: {why_not}")
            else:
                failed += 1
        total = passed + failed + skipped
        note = ""
        if total == 0:
            note = "NO TESTS"
            bad.append(f"{group}: no tests (a stale STRIPEFS_SKIP or a lost label?)")
        elif failed:
            bad.append(f"{group}: {failed} failed")
        rows.append((group, passed, failed, skipped, note))

    print("=== test summary ===")
    print(f"{'group':<12} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for group, p, f, s, note in rows:
        print(f"{group:<12} {p:>7} {f:>7} {s:>8}  {note}")
    for group, name, reason, why_not in skips:
        verdict = "NOT OK: " + why_not if why_not else "ok (machine condition holds)"
        print(f"skipped [{group}] {name}: {reason} -> {verdict}")
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
