#!/usr/bin/python3
"""bench/align: stripe alignment of FUSE WRITEs and backend full-stripe
writes on the running kernel, vs the mount's bdi max_ratio.

For each max_ratio x writers x app block size x coalescing on/off, mounts a
fresh embedded volume with `stripefs mount --max-ratio N`, writes
sequentially with dd (one file per writer, conv=fsync), reads
`stripefs stat --json`, unmounts. Repeats `--runs` times and reports median
and range of: stripe-aligned WRITE %, short WRITEs per run, mean WRITE size,
backend full-stripe %. Writes align.csv, align.md and align.png to --out DIR
(default: a fresh align-bench-YYYYmmdd-HHMMSS directory under the current
one; an existing one is refused). The committed tables
docs/results/align.{csv,md,png} are rewritten only with --update-docs (which
replaces --out). Usually started as `stripefs bench align [args]`.

--vm: the same measurement in the QEMU guest of kernel/ (Linux 7.2, stock and
patched fuse.ko): runs `kernel/bench-align.sh --server stripefs`, which writes
docs/results/kernel-align-stripefs.{md,png} (or into --out DIR).

Needs root (mounting, bdi max_ratio). Each mount has its own bdi, so the
setting dies with the mount (nothing to restore).
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lib import plots, run, sampling  # noqa: E402
from lib.stripefs import Stripefs, find_binary  # noqa: E402

# The committed tables, docs/results/align.{csv,md,png} (rewritten only with
# --update-docs); under --out DIR the same names: DIR/align.*.
DOCS_OUT = os.path.join(ROOT, "docs", "results", "align")
BLOCK_BYTES = {"4K": 4096, "256K": 262144, "1M": 1048576}
STATS = ["aligned_pct", "short", "mean_kib", "full_pct"]


def one_run(sf, ratio, writers, bs, coalesce, total_mib, volume_root):
    """One fresh volume and mount, `writers` dd's; returns the counters."""
    root = tempfile.mkdtemp(prefix="stripefs-align-", dir=volume_root)
    vol, mnt = os.path.join(root, "vol"), os.path.join(root, "mnt")
    os.makedirs(mnt)
    try:
        sf.mount(vol, mnt, "--max-ratio", ratio, "--coalesce", coalesce)
        try:
            count = total_mib * 1048576 // writers // BLOCK_BYTES[bs]
            procs = [subprocess.Popen(
                ["dd", "if=/dev/zero", f"of={mnt}/f{w}", f"bs={bs}",
                 f"count={count}", "conv=fsync"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for w in range(writers)]
            for p in procs:
                p.wait()
            st = sf.stat(mnt)
        finally:
            sf.umount(mnt)
    finally:
        run.remove_work(root)
    if not st:
        raise RuntimeError(f"`stripefs stat --json {mnt}` gave no JSON")
    w, b = st["writes"], st["backend"]
    return {"aligned_pct": w["aligned_pct"], "short": w["short"],
            "mean_kib": w["mean_size"] / 1024.0,
            "full_pct": b["full_stripe_pct"], "requests": w["requests"],
            "rmw": b["rmw_stripes"] + b["parity_delta_updates"]}


def summarize(ratio, writers, bs, coalesce, runs, mib, results):
    row = {"max_ratio": ratio, "writers": writers, "block": bs,
           "coalesce": coalesce, "runs": runs, "mib": mib}
    for k in STATS:
        vals = [r[k] for r in results]
        row[k + "_median"] = statistics.median(vals)
        row[k + "_min"], row[k + "_max"] = min(vals), max(vals)
    return row


def plot(rows, out):
    try:
        plt = plots.pyplot()
    except ImportError:
        print("python3-matplotlib missing: no PNG (apt-get install "
              "python3-matplotlib)", file=sys.stderr)
        return
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    keys = sorted({(r["writers"], r["block"], r["coalesce"]) for r in rows})
    for key in keys:
        sel = [r for r in rows
               if (r["writers"], r["block"], r["coalesce"]) == key]
        xs = [r["max_ratio"] for r in sel]
        lbl = f"{key[0]}w {key[1]} coalesce={key[2]}"
        if key[2] == "on":
            ax[0].plot(xs, [r["aligned_pct_median"] for r in sel],
                       marker="o", label=lbl)
        ax[1].plot(xs, [r["full_pct_median"] for r in sel], marker="o",
                   label=lbl)
    ax[0].set_title("stripe-aligned FUSE WRITEs (%)")
    ax[1].set_title("backend full-stripe writes (%)")
    for x in ax:
        x.set_xlabel("bdi max_ratio")
        x.set_ylim(-2, 102)
        x.grid(True)
        x.legend(fontsize=7)
    plots.save(fig, out + ".png", dpi=100)


def write_csv(rows, out):
    with open(out + ".csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        wr.writeheader()
        wr.writerows(rows)


def read_csv(out):
    with open(out + ".csv") as f:
        rows = [{k: (v if k in ("block", "coalesce") else float(v))
                 for k, v in r.items()} for r in csv.DictReader(f)]
    for r in rows:
        r["writers"], r["max_ratio"] = int(r["writers"]), int(r["max_ratio"])
    return rows


def med_range(r, key, spec):
    return (f"{r[key + '_median']:{spec}} [{r[key + '_min']:{spec}}-"
            f"{r[key + '_max']:{spec}}]")


def write_markdown(rows, out, header):
    with open(out + ".md", "w") as f:
        f.write(header)
        f.write("| max_ratio | writers | block | coalesce | aligned WRITE % "
                "(med [min-max]) | short WRITEs | mean WRITE KiB | backend "
                "full-stripe % |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['max_ratio']} | {r['writers']} | {r['block']} | "
                    f"{r['coalesce']} | {med_range(r, 'aligned_pct', '.1f')} "
                    f"| {med_range(r, 'short', '.0f')} | "
                    f"{r['mean_kib_median']:.0f} | "
                    f"{med_range(r, 'full_pct', '.1f')} |\n")


def configs_of(a):
    """[(max_ratio, writers, block)] and (runs, MiB per run) for the args."""
    ratios = [int(x) for x in a.ratios.split(",")]
    writers = [int(x) for x in a.writers.split(",")]
    sizes, runs, mib = a.blocks.split(","), a.runs, a.mib
    if a.quick:
        ratios, writers, sizes, runs, mib = [1, 10, 70], [1], ["1M"], 1, 64
    configs = [(r, w, b) for r in ratios for w in writers for b in sizes]
    if a.reduced:
        # Every ratio and writer count at 1M; the smaller application blocks
        # (which the page cache turns into the same writeback) at 3 ratios.
        configs = [(r, w, b) for (r, w, b) in configs
                   if b == "1M" or (w == 1 and r in (1, 10, 70))]
    return configs, runs, mib


def run_in_vm(a):
    """Hands the sweep to kernel/bench-align.sh --server stripefs (QEMU guest)."""
    binary = find_binary(a.binary)
    if not binary:
        sys.exit("align_bench: stripefs binary not found; pass --binary")
    cmd = [os.path.join(ROOT, "kernel", "bench-align.sh"), "--server",
           "stripefs", "--stripefs", binary, "--runs", str(a.runs),
           "--writers", a.writers]
    if a.mib:
        cmd += ["--mib", str(a.mib)]
    if a.ratios:
        cmd += ["--ratios", a.ratios]
    if a.out:
        cmd += ["--outdir", os.path.abspath(a.out)]
    elif not a.update_docs:
        cmd += ["--outdir", run.fresh_out("align-bench-vm", "align_bench")]
    sys.stdout.flush()
    os.execv(cmd[0], cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=None,
                    help="stripefs binary (default: $STRIPEFS_BIN, "
                         "build/tools/stripefs, PATH)")
    ap.add_argument("--out", default=None,
                    help="output dir, gets align.csv, align.md and align.png "
                         "(default: a fresh align-bench-YYYYmmdd-HHMMSS under "
                         "the current one)")
    ap.add_argument("--update-docs", action="store_true",
                    help="write docs/results/align.{csv,md,png} of the "
                         "checkout (the committed tables) instead of --out")
    ap.add_argument("--quick", action="store_true",
                    help="max_ratio {1,10,70}, 1 writer, 1M, 1 run, 64 MiB")
    ap.add_argument("--volume-root", default=None,
                    help="where the per-run volume and mount point live "
                         "(default: $TMPDIR); /dev/shm keeps chunk-store "
                         "syncs out of the measurement")
    ap.add_argument("--reduced", action="store_true",
                    help="all ratios x writers at 1M, 4K/256K only at "
                         "max_ratio 1/10/70 with 1 writer")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=None,
                    help="MiB written per run (all writers; default 256, "
                         "64 with --vm)")
    ap.add_argument("--plot-only", action="store_true",
                    help="redraw align.png from align.csv of --out DIR "
                         "(or of docs/results/ with --update-docs)")
    ap.add_argument("--ratios", default=None,
                    help="default 1,5,10,20,40,70,100 (--vm: without 100)")
    ap.add_argument("--vm", action="store_true",
                    help="measure in the QEMU guest on the stock and the "
                         "patched fuse.ko (kernel/bench-align.sh --server "
                         "stripefs) instead of on this kernel")
    ap.add_argument("--writers", default="1,4")
    ap.add_argument("--blocks", default="4K,256K,1M")
    a = ap.parse_args()
    if a.vm:
        return run_in_vm(a)
    a.mib = a.mib or 256
    a.ratios = a.ratios or "1,5,10,20,40,70,100"
    if a.update_docs and a.out:
        sys.exit("align_bench: --out and --update-docs exclude each other")
    if a.plot_only and not (a.out or a.update_docs):
        sys.exit("align_bench: --plot-only needs --out DIR or --update-docs")
    out = None  # the output path without extension
    if a.update_docs:
        out = DOCS_OUT
    elif a.out:
        out = os.path.join(os.path.abspath(a.out), "align")
    if a.plot_only:
        return plot(read_csv(out), out)
    binary = find_binary(a.binary)
    if not binary:
        sys.exit("align_bench: stripefs binary not found; pass --binary")
    if os.geteuid() != 0:
        sys.exit("align_bench: must run as root (mount, bdi max_ratio)")
    if out is None:
        out = os.path.join(run.fresh_out("align-bench", "align_bench"),
                           "align")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    run.raise_on_signals()
    sf = Stripefs(binary)
    configs, runs, mib = configs_of(a)
    rows = []
    started = time.time()
    for i, (ratio, nw, bs) in enumerate(configs):
        for co in ["on", "off"]:
            res = [one_run(sf, ratio, nw, bs, co, mib, a.volume_root)
                   for _ in range(runs)]
            rows.append(summarize(ratio, nw, bs, co, runs, mib, res))
            print(json.dumps(rows[-1]), flush=True)
            print(f"[{i + 1}/{len(configs)} configs, "
                  f"{time.time() - started:.0f} s]", file=sys.stderr,
                  flush=True)
            write_csv(rows, out)  # partial results survive an interruption
    kind = "quick" if a.quick else "reduced" if a.reduced else "full"
    header = (f"# Alignment benchmark ({kind}): {mib} MiB per run, {runs} "
              f"run(s), kernel {os.uname().release}\n\n"
              f"Volume and mount under "
              f"{a.volume_root or tempfile.gettempdir()}; load average at "
              f"the end: {sampling.loadavg()[0]:.1f}; "
              f"{time.time() - started:.0f} s for the sweep.\n\n")
    write_markdown(rows, out, header)
    plot(rows, out)
    print(f"results: {out}.csv, .md, .png"
          + (" (committed tables rewritten)" if a.update_docs else ""))


if __name__ == "__main__":
    main()
