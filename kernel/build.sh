#!/usr/bin/env bash
# Fetches linux-source-7.2 (private apt config), builds the small guest kernel, a stock
# fuse.ko and a patched fuse.ko (kernel/patches/*.patch) against it, and the guest test
# tools. Everything is cached outside the repo, keyed by source version + config hash
# (+ patch hash for the patched module), so a warm run takes seconds.
# Usage: kernel/build.sh [--line LINE] [--check-patches]
#   Prints the path of an env file (last stdout line) that kernel/vm/run.sh sources:
#   KERNEL_IMAGE, FUSE_KO_STOCK, FUSE_KO_PATCHED, TOOLS_DIR, KERNEL_VERSION.
#   --line LINE: the same for a distribution line whose kernel is rebuilt here
#   (kernel/lines/LINE/line.conf with LINE_BUILDER=kernel/build.sh, e.g. debian13, whose
#   Debian kernel builds FUSE in): its LINE_SOURCE_PKG through its private apt sources,
#   guest.config plus the line's guest.config (later settings win), its patches/; env file
#   CACHE/line-LINE.env for `kernel/vm/run.sh --line LINE` (current.env stays the 7.2 one).
# Env: STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel), JOBS (default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
jobs=${JOBS:-2}
line="" check_patches=0
while [ $# -gt 0 ]; do
  case "$1" in
    --line) line=$2; shift 2 ;;
    --check-patches) check_patches=1; shift ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
  esac
done
log() { echo "kernel/build${line:+[$line]}: $*" >&2; }
t0=$(date +%s)

configs=("$here/guest.config")
patch_dir=$here/patches
if [ -n "$line" ]; then
  grep -qx 'LINE_BUILDER=kernel/build.sh' "$here/lines/$line/line.conf" 2>/dev/null ||
    { log "ERROR: kernel/lines/$line/line.conf does not name LINE_BUILDER=kernel/build.sh"; exit 2; }
  [ -e "$here/lines/$line/guest.config" ] && configs+=("$here/lines/$line/guest.config")
  # shellcheck disable=SC1090
  patch_dir=$here/lines/$line/$(. "$here/lines/$line/line.conf"; echo "${LINE_PATCH_DIR:-patches}")
fi
src=$("$here/fetch-source.sh" $line | tail -1)
ver=$(cat "$src/.stripefs-extracted")
ckey=$(cat "${configs[@]}" | sha256sum | cut -c1-12)
kkey=$ver-$ckey
obj=$cache/obj-$kkey
mkdir -p "$obj"

# ---- guest kernel (tinyconfig + kernel/guest.config [+ the line's]) ----
if [ ! -e "$obj/.stripefs-done" ]; then
  log "building guest kernel $kkey in $obj (-j$jobs; ~10-25 min on 2 busy cores)"
  # The effective fragment: each option's last setting in guest.config, then the line's.
  awk -F= '/^CONFIG_/ { if (!($1 in v)) k[n++] = $1; v[$1] = $0 }
           END { for (i = 0; i < n; i++) print v[k[i]] }' "${configs[@]}" > "$obj/guest.fragment"
  make -s -C "$src" O="$obj" ARCH=x86_64 tinyconfig >&2
  "$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$obj/guest.fragment" >/dev/null
  make -s -C "$src" O="$obj" ARCH=x86_64 olddefconfig >&2
  missing=0
  while IFS='=' read -r k v; do
    case "$k" in ''|\#*) continue ;; esac
    if [ "$v" = n ]; then
      grep -q "^$k=" "$obj/.config" && { log "config: $k is set, wanted off"; missing=1; }
    else
      grep -qx "$k=$v" "$obj/.config" || { log "config: $k=$v did not stick"; missing=1; }
    fi
  done < "$obj/guest.fragment"
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

patches=("$patch_dir"/*.patch)
[ -e "${patches[0]}" ] || { log "ERROR: no patches in $patch_dir"; exit 1; }
pkey=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
patched=$cache/mod-$kkey-p$pkey
if [ ! -e "$patched/.stripefs-done" ]; then
  log "applying ${#patches[@]} patches to a copy of fs/fuse ($ver)"
  prepare_copy "$patched"
  for p in "${patches[@]}"; do
    if ! patch -d "$patched" -p1 --dry-run --quiet -F0 < "$p" >/dev/null 2>&1; then
      log "ERROR: $(basename "$p") no longer applies to $(basename "$src") $ver."
      patch -d "$patched" -p1 --dry-run -F0 < "$p" >&2 || true
      log "       Rebase ${patch_dir#"$here/"} on the new source (see docs/kernel.md)."
      exit 1
    fi
    patch -d "$patched" -p1 --quiet -F0 < "$p"
  done
  log "building patched fuse.ko"
  build_module "$patched"
  touch "$patched/.stripefs-done"
fi

if [ $check_patches = 1 ]; then
  for p in "${patches[@]}"; do
    "$src/scripts/checkpatch.pl" --no-tree --strict --quiet "$p" >&2 ||
      { log "ERROR: checkpatch complains about $(basename "$p")"; exit 1; }
  done
  log "checkpatch: ${#patches[@]} patches clean"
fi

# ---- guest tools (static) ----
tools=$("$here/vm/build-tools.sh")
tkey=${tools##*/tools-}

if [ -n "$line" ]; then
  env=$cache/line-$line.env
else
  env=$cache/current-$kkey-p$pkey-t$tkey.env
fi
cat > "$env" <<EOT
${line:+LINE=$line
}KERNEL_VERSION=$ver
KERNEL_RELEASE=$krel
KERNEL_IMAGE=$obj/arch/x86/boot/bzImage
FUSE_KO_STOCK=$stock/fs/fuse/fuse.ko
FUSE_KO_PATCHED=$patched/fs/fuse/fuse.ko
TOOLS_DIR=$tools
PATCH_KEY=$pkey
EOT
[ -n "$line" ] || ln -sfn "$env" "$cache/current.env"
log "done in $(( $(date +%s) - t0 )) s: $env"
echo "$env"
