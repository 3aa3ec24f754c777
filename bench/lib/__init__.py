"""bench/lib: the pieces every stripefs benchmark driver shares.

One copy of each, imported by bench/cluster/bench_cluster.py,
bench/fuse/transport_bench.py, bench/align/align_bench.py,
bench/write/write_bench.py, bench/read/read_bench.py and
bench/meta/meta_bench.py:

  knobs        kernel knobs (/sys, /proc/sys) set for a run and restored,
               drop_caches
  fio          running fio with JSON output and summarizing a job
  passthrough  libfuse3's passthrough_ll example: built at run time, mounted
               over a directory, stopped
  perf         file syncs per process (ext4 tracepoint) and flat CPU
               profiles of some processes, with perf record
  sampling     load average, host CPU busy (/proc/stat), per-process CPU
               seconds and peak RSS (/proc/<pid>/{stat,status})
  stripefs     the stripefs binary: finding it, running subcommands, mounts
               (pid from the banner, `stat --json`), umount with -l fallback
  run          logger with elapsed time, SIGTERM/SIGHUP -> KeyboardInterrupt,
               removing a work dir only when nothing under it is mounted,
               the checkout's commit, table number formatting, the
               default --out (a fresh timestamped dir under the current one)
  plots        matplotlib (Agg) import, optional

Drivers put ROOT/bench on sys.path and `import lib.<module>`; nothing here
keeps global state except what a caller creates. Python 3 stdlib only
(matplotlib optional for plots).
"""
