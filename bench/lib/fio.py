"""fio with JSON output: one runner and one summary for every driver.

run() raises RuntimeError (with fio's stderr tail) when fio fails or times
out, so a driver reports the failing job instead of a number. fio runs psync
unless the job names an --ioengine, and always with --lat_percentiles=1 so
p99 is the total (submission + completion) latency, falling back to the
completion latency when fio has no total percentiles. (The cluster and
transport drivers had drifted apart on exactly these points: the default
engine, the p99 fallback, and a timeout that escaped as TimeoutExpired.)
"""
import json
import subprocess


def run(directory, name, fioargs, timeout):
    """Runs one fio job in `directory`; returns fio's parsed JSON."""
    argv = ["fio", f"--name={name}", f"--directory={directory}",
            "--output-format=json", "--lat_percentiles=1"] + list(fioargs)
    if not any(x.startswith("--ioengine") for x in argv):
        argv.append("--ioengine=psync")
    try:
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"fio {name} in {directory} gave up after "
                           f"{timeout} s")
    if r.returncode != 0:
        raise RuntimeError(f"fio {name} in {directory} failed: "
                           f"{r.stderr.strip()[-400:]}")
    # fio may print warnings before the JSON object.
    return json.loads(r.stdout[r.stdout.index("{"):])


def summarize(res, kind):
    """Figures of the first job's `kind` ('read' or 'write') side."""
    j = res["jobs"][0]
    d = j[kind]
    pct = "99.000000"
    p99 = (d.get("lat_ns", {}).get("percentile", {}).get(pct) or
           d.get("clat_ns", {}).get("percentile", {}).get(pct))
    return {
        "mib_s": d["bw_bytes"] / 1048576.0,
        "iops": d["iops"],
        "lat_mean_us": d["lat_ns"]["mean"] / 1000.0,
        "lat_p99_us": p99 / 1000.0 if p99 is not None else None,
        "io_mib": d["io_bytes"] / 1048576.0,
        "ios": d["total_ios"],
        "runtime_s": d["runtime"] / 1000.0,
        "fio_usr_pct": j.get("usr_cpu"),
        "fio_sys_pct": j.get("sys_cpu"),
    }
