#!/usr/bin/env bash
# Builds (once per binary) the part of the guest initramfs that carries the product: the
# stripefs binary with its debug info stripped as /bin/stripefs, every shared library ldd
# lists for it (at the same paths) and the ELF interpreter. kernel/vm/run.sh appends the
# archive to the per-boot one (the kernel unpacks concatenated cpio archives in order).
# Usage: kernel/vm/stripefs-root.sh BIN [CACHE_DIR]
#   Prints the path of the cpio archive (newc, uncompressed: the guest unpacks it faster
#   than a compressed one under TCG). Cached as CACHE_DIR/stripefs-root-<key>.cpio, key =
#   hash of the binary, its libraries and this script; the newest 4 archives are kept.
set -euo pipefail
bin=$1
cache=${2:-${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}}
log() { echo "stripefs-root: $*" >&2; }
[ -x "$bin" ] || { log "ERROR: $bin is not an executable (build it: cmake --build build --target stripefs)"; exit 1; }
deps=$(LC_ALL=C ldd "$bin") || { log "ERROR: ldd $bin failed"; exit 1; }
if echo "$deps" | grep -q 'not found'; then
  log "ERROR: libraries of $bin are missing on this host:"; echo "$deps" | grep 'not found' >&2; exit 1
fi
# Every absolute path ldd names: "libx.so => /path (0x..)" and the interpreter "/path (0x..)".
libs=$(echo "$deps" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u)
[ -n "$libs" ] || { log "ERROR: ldd lists no libraries for $bin (a static binary needs none: not supported here)"; exit 1; }
key=$( { sha256sum "$bin" "$0"; for l in $libs; do sha256sum "$(readlink -f "$l")"; done; } |
  awk '{ print $1 }' | sha256sum | cut -c1-16)
out=$cache/stripefs-root-$key.cpio
if [ -s "$out" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
stage=$(mktemp -d "$cache/.stripefs-root.XXXXXX")
trap 'rm -rf "$stage" "$stage.cpio"' EXIT
mkdir -p "$stage/bin"
objcopy --strip-debug "$bin" "$stage/bin/stripefs"
for l in $libs; do
  mkdir -p "$stage$(dirname "$l")"
  cp -L "$l" "$stage$l"
done
(cd "$stage" && find . ! -name . | cpio -o -H newc --quiet) > "$stage.cpio"
mv "$stage.cpio" "$out"  # atomic: a concurrent run builds the same bytes
log "built $out ($(du -m "$out" | cut -f1) MiB: stripefs + $(echo "$libs" | wc -l) libraries)"
ls -t "$cache"/stripefs-root-*.cpio | tail -n +5 | xargs -r rm -f
echo "$out"
