#!/usr/bin/env bash
# Fetches linux-source-7.2 (private apt config), builds the small guest kernel, a stock
# fuse.ko and a patched fuse.ko (kernel/patches/*.patch) against it, and the guest test
# tools. Everything is cached outside the repo, keyed by source version + config hash
# (+ patch hash for the patched module), so a warm run takes seconds.
# Usage: kernel/build.sh [--check-patches]
#   Prints the path of an env file (last stdout line) that kernel/vm/run.sh sources:
#   KERNEL_IMAGE, FUSE_KO_STOCK, FUSE_KO_PATCHED, PROBE, DIO_CHECK, KERNEL_VERSION.
# Env: STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel), JOBS (default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
jobs=${JOBS:-2}
log() { echo "kernel/build: $*" >&2; }
t0=$(date +%s)

src=$("$here/fetch-source.sh" | tail -1)
ver=$(cat "$src/.stripefs-extracted")
ckey=$(sha256sum "$here/guest.config" | cut -c1-12)
kkey=$ver-$ckey
obj=$cache/obj-$kkey
mkdir -p "$obj"

# ---- guest kernel (tinyconfig + kernel/guest.config) ----
if [ ! -e "$obj/.stripefs-done" ]; then
  log "building guest kernel $kkey in $obj (-j$jobs; ~10-25 min on 2 busy cores)"
  make -s -C "$src" O="$obj" ARCH=x86_64 tinyconfig >&2
  "$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$here/guest.config" >/dev/null
  make -s -C "$src" O="$obj" ARCH=x86_64 olddefconfig >&2
  missing=0
  while IFS='=' read -r k v; do
    case "$k" in ''|\#*) continue ;; esac
    if [ "$v" = n ]; then
      grep -q "^$k=" "$obj/.config" && { log "config: $k is set, wanted off"; missing=1; }
    else
      grep -qx "$k=$v" "$obj/.config" || { log "config: $k=$v did not stick"; missing=1; }
    fi
  done < "$here/guest.config"
  [ $missing = 0 ] || { log "ERROR: guest.config options were dropped by Kconfig"; exit 1; }
  nice make -C "$src" O="$obj" ARCH=x86_64 -j"$jobs" bzImage modules > "$obj/build.log" 2>&1 ||
    { tail -40 "$obj/build.log" >&2; log "ERROR: kernel build failed (log: $obj/build.log)"; exit 1; }
  touch "$obj/.stripefs-done"
else
  log "guest kernel $kkey cached"
fi
krel=$(cat "$obj/include/config/kernel.release")

# ---- fuse.ko: stock (in-tree) and patched (external M= build) ----
# The patched module is built from a copy of fs/fuse; the copy's uapi fuse.h is force-included so
# the patched ABI header wins over the tree's (its include guard makes the later include a
# no-op).
build_module() { # name srcdir-with-fs/fuse+include
  local d=$1
  make -C "$src" O="$obj" ARCH=x86_64 M="$d/fs/fuse" -j"$jobs" \
    KCFLAGS="-include $d/include/uapi/linux/fuse.h" modules > "$d/build.log" 2>&1 ||
    { tail -40 "$d/build.log" >&2; log "ERROR: module build failed (log: $d/build.log)"; exit 1; }
  [ -e "$d/fs/fuse/fuse.ko" ]
}
prepare_copy() { # dir
  local d=$1
  rm -rf "$d"
  mkdir -p "$d/fs" "$d/include/uapi/linux"
  cp -a "$src/fs/fuse" "$d/fs/"
  cp "$src/include/uapi/linux/fuse.h" "$d/include/uapi/linux/"
}

# The stock module is the tree's own fs/fuse/fuse.ko from the kernel build above (same
# source, same uapi header): building it a second time would only cost CI time.
stock=$obj
[ -e "$stock/fs/fuse/fuse.ko" ] ||
  { log "ERROR: $obj/fs/fuse/fuse.ko missing (is CONFIG_FUSE_FS=m in guest.config?)"; exit 1; }

patches=("$here"/patches/*.patch)
[ -e "${patches[0]}" ] || { log "ERROR: no patches in $here/patches"; exit 1; }
pkey=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
patched=$cache/mod-$kkey-p$pkey
if [ ! -e "$patched/.stripefs-done" ]; then
  log "applying ${#patches[@]} patches to a copy of fs/fuse ($ver)"
  prepare_copy "$patched"
  for p in "${patches[@]}"; do
    if ! patch -d "$patched" -p1 --dry-run --quiet -F0 < "$p" >/dev/null 2>&1; then
      log "ERROR: $(basename "$p") no longer applies to linux-source-7.2 $ver."
      patch -d "$patched" -p1 --dry-run -F0 < "$p" >&2 || true
      log "       Rebase kernel/patches on the new source (see docs/kernel.md)."
      exit 1
    fi
    patch -d "$patched" -p1 --quiet -F0 < "$p"
  done
  log "building patched fuse.ko"
  build_module "$patched"
  touch "$patched/.stripefs-done"
fi

if [ "${1:-}" = --check-patches ]; then
  for p in "${patches[@]}"; do
    "$src/scripts/checkpatch.pl" --no-tree --strict --quiet "$p" >&2 ||
      { log "ERROR: checkpatch complains about $(basename "$p")"; exit 1; }
  done
  log "checkpatch: ${#patches[@]} patches clean"
fi

# ---- guest tools (static) ----
tools=$("$here/vm/build-tools.sh")
tkey=${tools##*/tools-}

env=$cache/current-$kkey-p$pkey-t$tkey.env
cat > "$env" <<EOT
KERNEL_VERSION=$ver
KERNEL_RELEASE=$krel
KERNEL_IMAGE=$obj/arch/x86/boot/bzImage
FUSE_KO_STOCK=$stock/fs/fuse/fuse.ko
FUSE_KO_PATCHED=$patched/fs/fuse/fuse.ko
TOOLS_DIR=$tools
PATCH_KEY=$pkey
EOT
ln -sfn "$env" "$cache/current.env"
log "done in $(( $(date +%s) - t0 )) s: $env"
echo "$env"
