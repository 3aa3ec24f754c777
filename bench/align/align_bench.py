#!/usr/bin/python3
"""bench/align: stripe alignment of FUSE WRITEs and backend full-stripe
writes on the running kernel, vs the mount's bdi max_ratio.

For each max_ratio x writers x app block size x coalescing on/off, mounts a
fresh embedded volume with `stripefs mount --max-ratio N`, writes
sequentially with dd (one file per writer, conv=fsync), reads
`stripefs stat --json`, unmounts. Repeats `--runs` times and reports median
and range of: stripe-aligned WRITE %, short WRITEs per run, mean WRITE size,
backend full-stripe %. Writes CSV, markdown and PNG under docs/results/.

Needs root (mounting, bdi max_ratio). Each mount has its own bdi, so the
setting dies with the mount (nothing to restore).
"""
import argparse, csv, json, os, shutil, statistics, subprocess, sys, tempfile, time

def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)

def one_run(binary, ratio, writers, bs, coalesce, total_mib, volume_root):
    root = tempfile.mkdtemp(prefix="stripefs-align-", dir=volume_root)
    vol, mnt = os.path.join(root, "vol"), os.path.join(root, "mnt")
    os.makedirs(mnt)
    try:
        sh([binary, "mount", vol, mnt, "--max-ratio", str(ratio), "--coalesce", coalesce])
        try:
            per = total_mib * 1024 * 1024 // writers
            bsb = {"4K": 4096, "256K": 262144, "1M": 1048576}[bs]
            procs = [subprocess.Popen(["dd", "if=/dev/zero", f"of={mnt}/f{w}", f"bs={bs}",
                                       f"count={per // bsb}", "conv=fsync"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for w in range(writers)]
            for p in procs:
                p.wait()
            st = json.loads(sh([binary, "stat", "--json", mnt]).stdout)
        finally:
            subprocess.run([binary, "umount", mnt], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    w, b = st["writes"], st["backend"]
    return {"aligned_pct": w["aligned_pct"], "short": w["short"],
            "mean_kib": w["mean_size"] / 1024.0, "full_pct": b["full_stripe_pct"],
            "requests": w["requests"], "rmw": b["rmw_stripes"] + b["parity_delta_updates"]}

def plot(rows, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
        keys = sorted({(r["writers"], r["block"], r["coalesce"]) for r in rows})
        for key in keys:
            sel = [r for r in rows if (r["writers"], r["block"], r["coalesce"]) == key]
            xs = [r["max_ratio"] for r in sel]
            lbl = f"{key[0]}w {key[1]} coalesce={key[2]}"
            if key[2] == "on":
                ax[0].plot(xs, [r["aligned_pct_median"] for r in sel], marker="o", label=lbl)
            ax[1].plot(xs, [r["full_pct_median"] for r in sel], marker="o", label=lbl)
        ax[0].set_title("stripe-aligned FUSE WRITEs (%)")
        ax[1].set_title("backend full-stripe writes (%)")
        for x in ax:
            x.set_xlabel("bdi max_ratio"); x.set_ylim(-2, 102); x.grid(True); x.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=100)
    except ImportError:
        print("python3-matplotlib missing: no PNG (apt-get install python3-matplotlib)", file=sys.stderr)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/tools/stripefs")
    ap.add_argument("--out", default="docs/results/align")
    ap.add_argument("--quick", action="store_true", help="max_ratio {1,10,70}, 1 writer, 1M, 1 run, 64 MiB")
    ap.add_argument("--volume-root", default=None,
                    help="where the per-run volume and mount point live (default: $TMPDIR); "
                         "/dev/shm keeps chunk-store syncs out of the measurement")
    ap.add_argument("--reduced", action="store_true",
                    help="all ratios x writers at 1M, 4K/256K only at max_ratio 1/10/70 with 1 writer")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=256, help="MiB written per run (all writers)")
    ap.add_argument("--plot-only", action="store_true", help="redraw OUT.png from OUT.csv")
    ap.add_argument("--ratios", default="1,5,10,20,40,70,100")
    ap.add_argument("--writers", default="1,4")
    ap.add_argument("--blocks", default="4K,256K,1M")
    a = ap.parse_args()
    if a.plot_only:
        with open(a.out + ".csv") as f:
            rows = [{k: (v if k in ("block", "coalesce") else float(v)) for k, v in r.items()}
                    for r in csv.DictReader(f)]
        for r in rows:
            r["writers"], r["max_ratio"] = int(r["writers"]), int(r["max_ratio"])
        return plot(rows, a.out)
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
    rows = []
    started = time.time()
    for i, (ratio, nw, bs) in enumerate(configs):
        for co in ["on", "off"]:
            res = [one_run(a.binary, ratio, nw, bs, co, mib, a.volume_root) for _ in range(runs)]
            row = {"max_ratio": ratio, "writers": nw, "block": bs, "coalesce": co,
                   "runs": runs, "mib": mib}
            for k in ["aligned_pct", "short", "mean_kib", "full_pct"]:
                vals = [r[k] for r in res]
                row[k + "_median"] = statistics.median(vals)
                row[k + "_min"], row[k + "_max"] = min(vals), max(vals)
            rows.append(row)
            print(json.dumps(row), flush=True)
            print(f"[{i + 1}/{len(configs)} configs, {time.time() - started:.0f} s]",
                  file=sys.stderr, flush=True)
            write_csv(rows, a.out)  # partial results survive an interrupted sweep
    header = (f"# Alignment benchmark ({'quick' if a.quick else 'reduced' if a.reduced else 'full'}): "
              f"{mib} MiB per run, {runs} run(s), kernel {os.uname().release}\n\n"
              f"Volume and mount under {a.volume_root or tempfile.gettempdir()}; "
              f"load average at the end: {os.getloadavg()[0]:.1f}; "
              f"{time.time() - started:.0f} s for the sweep.\n\n")
    write_markdown(rows, a.out, header)
    plot(rows, a.out)

def write_csv(rows, out):
    with open(out + ".csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        wr.writeheader()
        wr.writerows(rows)

def write_markdown(rows, out, header):
    with open(out + ".md", "w") as f:
        f.write(header)
        f.write("| max_ratio | writers | block | coalesce | aligned WRITE % (med [min-max]) | "
                "short WRITEs | mean WRITE KiB | backend full-stripe % |\n|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['max_ratio']} | {r['writers']} | {r['block']} | {r['coalesce']} | "
                    f"{r['aligned_pct_median']:.1f} [{r['aligned_pct_min']:.1f}-{r['aligned_pct_max']:.1f}] | "
                    f"{r['short_median']:.0f} [{r['short_min']:.0f}-{r['short_max']:.0f}] | "
                    f"{r['mean_kib_median']:.0f} | "
                    f"{r['full_pct_median']:.1f} [{r['full_pct_min']:.1f}-{r['full_pct_max']:.1f}] |\n")

if __name__ == "__main__":
    main()
