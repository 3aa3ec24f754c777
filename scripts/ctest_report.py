#!/usr/bin/env python3
"""Summary of the ctest groups of scripts/test.sh, from ctest --output-junit files.

Usage: ctest_report.py [--min-counts FILE] GROUP=JUNIT_XML[@BUILD_DIR] ...
       ctest_report.py --check-labels BUILD_DIR LABEL...
  (GROUP=-: the group could not run at all; counted as a failure)

Prints passed/failed/skipped per group and every skipped test with its reason. Exits 1 if
a group failed or has no tests, or if a test skipped for a reason this script cannot match
to a machine condition, or whose machine condition does not hold here (a skip must describe
the machine, never the product's own result: see SKIP_REASONS).

A ctest entry that runs several gtest cases in one process (stripefs_add_gtest_group in
tests/CMakeLists.txt) leaves BUILD_DIR/gtest-xml/entries/NAME; its cases are read from
gtest's BUILD_DIR/gtest-xml/NAME.xml and counted one by one, each skip checked with its own
reason. Such an entry without its XML fails. ctest's "not run" counts as a skip only when
ctest says why (SKIP_RETURN_CODE or SKIP_REGULAR_EXPRESSION); anything else (a missing
executable, a failed fixture) is a failure.

--min-counts FILE: lines "GROUP MIN"; a group that ran fewer cases (passed + failed +
skipped) than its minimum fails: a lost suite shows even when the rest is green.
--check-labels: every test registered in BUILD_DIR carries one of the LABELs (a test in no
group would never run); exits 1 and names the others.
"""
import ctypes
import json
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


def no_overlay_module():
    """overlayfs neither built in, loaded, nor loadable."""
    fs = read("/proc/filesystems") or ""
    if "\toverlay\n" in fs:
        return False
    if shutil.which("modprobe") is None:
        return True
    return subprocess.run(["modprobe", "-n", "overlay"], capture_output=True).returncode != 0


def package_installed(name):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True,
                       text=True)
    return r.returncode == 0 and r.stdout.endswith(" installed")


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
    (r"(/usr/bin/etcd(ctl)?) is not installed", lambda m: not os.access(m.group(1), os.X_OK),
     "etcd binaries missing"),
    (r"systemd-analyze is not installed", lambda m: shutil.which("systemd-analyze") is None,
     "systemd-analyze missing"),
    (r"no overlayfs in this kernel", lambda m: no_overlay_module(), "no overlay module"),
    (r"a stripefs package is already installed on this machine",
     lambda m: package_installed("stripefs"), "the stripefs package is installed"),
    (r"another mount helper is at (\S+)", lambda m: os.path.lexists(m.group(1)),
     "that mount helper exists"),
]

# Why ctest may mark a test "not run" and the report still call it a skip.
CTEST_SKIPS = ("SKIP_REGULAR_EXPRESSION_MATCHED", "SKIP_RETURN_CODE=77")


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


def gtest_cases(path):
    """(name, status, reason) per case of a gtest XML file; status run/fail/skip."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = f"{tc.get('classname')}.{tc.get('name')}"
        if tc.find("failure") is not None or tc.find("error") is not None:
            cases.append((name, "fail", ""))
        elif tc.get("result") == "skipped" or tc.find("skipped") is not None:
            sk = tc.find("skipped")
            msg = sk.get("message", "") if sk is not None else ""
            # gtest's message is "file:line\nthe test's words".
            lines = msg.split("\n", 1)
            text = lines[1] if len(lines) > 1 else msg
            cases.append((name, "skip", " ".join(text.split())))
        elif tc.get("status") == "notrun":
            cases.append((name, "fail", "DISABLED_ in a group: it never runs"))
        else:
            cases.append((name, "run", ""))
    return cases


def read_min_counts(path):
    mins = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                mins[line[0]] = int(line[1])
    return mins


def check_labels(build_dir, labels):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True,
                         text=True, check=True).stdout
    bad = []
    tests = json.loads(out).get("tests", [])
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if not set(props.get("LABELS", [])) & set(labels):
            bad.append(f"{t['name']} (labels: {','.join(props.get('LABELS', [])) or 'none'})")
    for b in bad:
        print(f"FAIL: test {b} is in no group ({' '.join(labels)}): it never runs")
    print(f"labels: {len(tests)} tests registered, {len(tests) - len(bad)} in a group")
    return 1 if bad else 0


def main(argv):
    mins = {}
    if argv[:1] == ["--min-counts"]:
        mins = read_min_counts(argv[1])
        argv = argv[2:]
    bad = []
    rows = []
    skips = []
    for arg in argv:
        group, _, path = arg.partition("=")
        path, _, build_dir = path.partition("@")
        if path == "-" or not os.path.exists(path):
            rows.append((group, 0, 0, 0, "did not run"))
            bad.append(f"{group}: did not run (see the log above)")
            continue
        xml_dir = os.path.join(build_dir, "gtest-xml") if build_dir else ""
        passed = failed = skipped = 0

        def skip(name, reason):
            nonlocal skipped
            skipped += 1
            why_not = check_skip(reason)
            skips.append((group, name, reason or "(no reason printed)", why_not))
            if why_not:
                bad.append(f"{group}: {name} skipped: {why_not}")

        for tc in ET.parse(path).getroot().iter("testcase"):
            status = tc.get("status")
            name = tc.get("name")
            out = tc.findtext("system-out") or ""
            sk = tc.find("skipped")
            ctest_why = sk.get("message", "") if sk is not None else ""
            if xml_dir and os.path.exists(os.path.join(xml_dir, "entries", name)):
                gx = os.path.join(xml_dir, name + ".xml")
                if status == "notrun":
                    failed += 1
                    bad.append(f"{group}: {name} did not run: {ctest_why}")
                    continue
                if not os.path.exists(gx):
                    failed += 1
                    bad.append(f"{group}: {name} wrote no gtest XML ({gx}): its cases are "
                               "unknown (crashed, timed out, or ran no gtest)")
                    continue
                cases = gtest_cases(gx)
                if not cases:
                    failed += 1
                    bad.append(f"{group}: {name} ran no gtest case")
                for case, st, reason in cases:
                    full = f"{name}/{case}"
                    if st == "run":
                        passed += 1
                    elif st == "skip":
                        skip(full, reason)
                    else:
                        failed += 1
                        bad.append(f"{group}: {full} failed" + (f": {reason}" if reason else ""))
                # Every case passed or skipped, yet the process failed (exit, leak check,
                # a crash after the last case): that is a failure of the entry.
                if status not in ("run",) and not any(st == "fail" for _, st, _ in cases):
                    failed += 1
                    bad.append(f"{group}: {name} failed outside its cases (see its output)")
                continue
            if status == "run":
                passed += 1
                if "[  SKIPPED ]" in out and "[==========]" in out:
                    # A gtest process with skipped cases that ctest read as passed: the
                    # skips would never be checked (register it with
                    # stripefs_add_gtest_group or gtest_discover_tests).
                    failed += 1
                    passed -= 1
                    bad.append(f"{group}: {name} passed with skipped gtest cases the report "
                               "cannot see (register it with stripefs_add_gtest_group)")
            elif status in ("notrun", "disabled") or sk is not None:
                if ctest_why not in CTEST_SKIPS:
                    failed += 1
                    bad.append(f"{group}: {name} not run: {ctest_why or status} (not a skip)")
                    continue
                skip(name, skip_reason(out))
            else:
                failed += 1
        total = passed + failed + skipped
        note = ""
        if total == 0:
            note = "NO TESTS"
            bad.append(f"{group}: no tests (a stale STRIPEFS_SKIP or a lost label?)")
        elif failed:
            bad.append(f"{group}: {failed} failed")
        if group in mins and total < mins[group]:
            note = (note + f" fewer than {mins[group]} cases").strip()
            bad.append(f"{group}: {total} cases, fewer than the committed minimum "
                       f"{mins[group]} (tests/min-counts.txt): a suite was lost")
        rows.append((group, passed, failed, skipped, note))

    print("=== test summary (cases) ===")
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
    if sys.argv[1] == "--check-labels":
        sys.exit(check_labels(sys.argv[2], sys.argv[3:]))
    sys.exit(main(sys.argv[1:]))
