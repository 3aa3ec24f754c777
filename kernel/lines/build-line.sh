#!/usr/bin/env bash
# Builds one distribution kernel line (kernel/lines/LINE): downloads the distribution's own
# packages by name (linux-source, linux-headers + -common, linux-kbuild, linux-image) at one
# version, builds the patched fuse.ko OUT OF TREE against the headers (only fs/fuse), and takes
# the stock fuse.ko and the kernel image from the image package. Everything is cached outside
# the repo under $STRIPEFS_KERNEL_CACHE/lines/LINE, keyed by package version (+ patch hash for
# the module); nothing is installed into the system's kernel or module directories.
# Usage: kernel/lines/build-line.sh LINE [--check-patches]
#   Prints the path of an env file (last stdout line) for `kernel/vm/run.sh --line LINE`:
#   KERNEL_IMAGE, FUSE_KO_STOCK, FUSE_KO_PATCHED, TOOLS_DIR, KERNEL_RELEASE, KERNEL_HEADERS...
# Env: STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel), JOBS (default 2),
#      STRIPEFS_KERNEL_OFFLINE=1 (use the newest cached version, no package index)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
line=${1:-}
lines=$(cd "$here" && grep -l '^LINE_BUILDER=build-line' */line.conf 2>/dev/null |
        sed 's#/line.conf##' | tr '\n' ' ')
[ -n "$line" ] && [ -f "$here/$line/line.conf" ] &&
  grep -q '^LINE_BUILDER=build-line' "$here/$line/line.conf" ||
  { echo "build-line: usage: build-line.sh LINE [--check-patches] (LINE one of: $lines)" >&2; exit 2; }
check_patches=0
[ "${2:-}" = --check-patches ] && check_patches=1
# shellcheck disable=SC1090
. "$here/$line/line.conf"
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
lc=$cache/lines/$line
jobs=${JOBS:-2}
log() { echo "build-line[$line]: $*" >&2; }
t0=$(date +%s)
mkdir -p "$lc"

# ---- apt: the machine's own suite as it is, or a private configuration (own sources.list,
# state and cache dirs, as kernel/fetch-source.sh); the machine's apt sources are never touched.
APT_OPTS=()
if [ "$LINE_APT_SOURCES" != system ]; then
  st=$lc/apt
  mkdir -p "$st/state/lists/partial" "$st/cache/archives/partial" "$st/etc/sources.list.d" \
    "$st/etc/preferences.d"
  [ -e "$st/state/status" ] || : > "$st/state/status"
  APT_OPTS=(
    -o "Dir::Etc::SourceList=$here/$line/$LINE_APT_SOURCES"
    -o "Dir::Etc::SourceParts=$st/etc/sources.list.d"
    -o "Dir::Etc::Preferences=$st/etc/preferences"
    -o "Dir::Etc::PreferencesParts=$st/etc/preferences.d"
    -o "Dir::State=$st/state"
    -o "Dir::State::status=$st/state/status"
    -o "Dir::Cache=$st/cache"
    -o "APT::Sandbox::User=root"
    -o "Debug::NoLocking=1"
  )
fi
pkg_field() { # pkg=ver field
  apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null | awk -v f="$2:" '$1 == f { sub(/^[^:]*: /, ""); print; exit }'
}

ver=""
if [ "${STRIPEFS_KERNEL_OFFLINE:-0}" != 1 ]; then
  if [ "$LINE_APT_SOURCES" != system ]; then
    lists=$(ls "$st/state/lists/"*_Packages* 2>/dev/null | head -1 || true)
    if [ -z "$lists" ] || [ -n "$(find "$lists" -mmin +720 2>/dev/null)" ]; then
      log "apt-get update (private config $LINE_APT_SOURCES)"
      apt-get "${APT_OPTS[@]}" -q update >&2 || log "WARNING: apt-get update failed (offline?)"
    fi
  fi
  # The newest version of the headers meta package whose linux-source has the same version.
  src_vers=" $(apt-cache "${APT_OPTS[@]}" madison "$LINE_SOURCE_PKG" 2>/dev/null |
               awk -F'|' '{gsub(/ /,"",$2); print $2}' | tr '\n' ' ') "
  for v in $(apt-cache "${APT_OPTS[@]}" madison "linux-headers-$LINE_FLAVOUR" 2>/dev/null |
             awk -F'|' '{gsub(/ /,"",$2); print $2}'); do
    case "$v" in "$LINE_KERNEL".*) ;; *) continue ;; esac
    case "$src_vers" in *" $v "*) ;; *) continue ;; esac
    if [ -z "$ver" ] || dpkg --compare-versions "$v" gt "$ver"; then ver=$v; fi
  done
fi
if [ -z "$ver" ]; then
  ver=$(ls -d "$lc"/v-*/.stripefs-done 2>/dev/null | sed 's#.*/v-\([^/]*\)/.stripefs-done#\1#' |
        sort -V | tail -1 || true)
  [ -n "$ver" ] || {
    log "ERROR: no linux-headers-$LINE_FLAVOUR $LINE_KERNEL.x with a matching $LINE_SOURCE_PKG in"
    log "       the package index ($LINE_APT_SOURCES) and nothing cached under $lc."
    log "       Check network access to deb.debian.org (and run apt-get update for 'system')."
    exit 1; }
  log "using cached $ver (no package index)"
fi

vd=$lc/v-$ver
if [ ! -e "$vd/.stripefs-done" ]; then
  rm -rf "$vd"
  mkdir -p "$vd/dl" "$vd/root" "$vd/src"
  hdr=$(pkg_field "linux-headers-$LINE_FLAVOUR=$ver" Depends | tr ',' '\n' |
        sed -n 's/^ *\(linux-headers-[^ ]*\) (= .*/\1/p' | head -1)
  [ -n "$hdr" ] || { log "ERROR: cannot resolve linux-headers-$LINE_FLAVOUR=$ver"; exit 1; }
  abi=${hdr#linux-headers-}
  img=linux-image-$abi
  deps=$(pkg_field "$hdr=$ver" Depends | tr ',' '\n' |
         sed -n 's/^ *\(linux-\(headers\|kbuild\)-[^ |]*\).*/\1/p' | sort -u)
  pkgs="$LINE_SOURCE_PKG $hdr $deps $img"
  log "downloading $pkgs ($ver)"
  want=()
  for p in $pkgs; do want+=("$p=$ver"); done
  (cd "$vd/dl" && apt-get "${APT_OPTS[@]}" -q download "${want[@]}" >&2)
  for d in "$vd"/dl/linux-headers-*.deb "$vd"/dl/linux-kbuild-*.deb; do dpkg-deb -x "$d" "$vd/root"; done
  # From the image only the kernel and its stock fs/fuse modules (not the other ~400 MB).
  dpkg-deb --fsys-tarfile "$vd"/dl/"$img"_*.deb |
    tar -x -C "$vd/root" --wildcards './boot/vmlinuz-*' '*/kernel/fs/fuse/*'
  # Only fs/fuse and the uapi header from the source tarball.
  srcdeb=$(ls "$vd"/dl/"$LINE_SOURCE_PKG"_*.deb)
  tarball=$(dpkg-deb -c "$srcdeb" | awk '{print $NF}' | grep "/usr/src/$LINE_SOURCE_PKG.tar" | head -1)
  dpkg-deb --fsys-tarfile "$srcdeb" | tar -xO "$tarball" |
    tar -xJ -C "$vd/src" --strip-components=1 \
      "$LINE_SOURCE_PKG/fs/fuse" "$LINE_SOURCE_PKG/include/uapi/linux/fuse.h"
  [ -e "$vd/src/fs/fuse/file.c" ] || { log "ERROR: fs/fuse missing in $srcdeb"; exit 1; }
  # The flavour's Makefile includes the -common one by absolute path: point it at our copy.
  kdir=$(ls -d "$vd"/root/usr/src/"$hdr")
  sed -i "s#/usr/src/#$vd/root/usr/src/#g" "$kdir/Makefile"
  echo "$abi" > "$vd/abi"
  rm -rf "$vd/dl"
  touch "$vd/.stripefs-done"
  log "$ver fetched and extracted in $(( $(date +%s) - t0 )) s"
fi
abi=$(cat "$vd/abi")
kdir=$vd/root/usr/src/linux-headers-$abi
krel=$(sed -n 's/^override KERNELRELEASE = //p' "$kdir/.kernelvariables" 2>/dev/null || true)
[ -n "$krel" ] || krel=$abi
# A fuse.ko can only replace the distribution's FUSE when that is a module.
if ! grep -q '^CONFIG_FUSE_FS=m' "$kdir/.config"; then
  log "ERROR: $LINE_DESC builds FUSE into the kernel ($(grep '^CONFIG_FUSE_FS' "$kdir/.config")):"
  log "       no out-of-tree fuse.ko can replace it on this kernel (docs/kernel.md, Kernel lines)."
  exit 1
fi
image=$(ls "$vd"/root/boot/vmlinuz-* | head -1)
stock=$(find "$vd/root" -path '*/kernel/fs/fuse/fuse.ko*' | head -1)
case "$stock" in
  *.xz) [ -e "${stock%.xz}" ] || xz -dk "$stock"; stock=${stock%.xz} ;;
  *.zst) [ -e "${stock%.zst}" ] || zstd -q -d "$stock" -o "${stock%.zst}"; stock=${stock%.zst} ;;
esac
[ -e "$stock" ] || { log "ERROR: no stock fuse.ko in $img"; exit 1; }

# ---- patched fuse.ko, out of tree against the distribution's headers ----
patches=("$here/$line"/patches/*.patch)
[ -e "${patches[0]}" ] || { log "ERROR: no patches in $here/$line/patches"; exit 1; }
pkey=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
mod=$lc/mod-$ver-p$pkey
if [ ! -e "$mod/.stripefs-done" ]; then
  rm -rf "$mod"
  mkdir -p "$mod"
  cp -a "$vd/src/fs" "$vd/src/include" "$mod/"
  for p in "${patches[@]}"; do
    if ! patch -d "$mod" -p1 --dry-run --quiet -F0 < "$p" > /dev/null 2>&1; then
      log "ERROR: $(basename "$p") does not apply to $LINE_SOURCE_PKG $ver:"
      patch -d "$mod" -p1 --dry-run -F0 < "$p" >&2 || true
      log "       Rebase kernel/lines/$line/patches on the new source (docs/kernel.md)."
      exit 1
    fi
    patch -d "$mod" -p1 --quiet -F0 < "$p"
  done
  log "building patched fuse.ko against $abi headers"
  # The copy's uapi fuse.h is force-included so that the patched ABI header wins over the
  # headers package's (its include guard makes the later include a no-op). cuse and virtiofs
  # are not needed by the tests (the DKMS package builds them too).
  make -C "$kdir" M="$mod/fs/fuse" -j"$jobs" CONFIG_CUSE= CONFIG_VIRTIO_FS= \
    KCFLAGS="-include $mod/include/uapi/linux/fuse.h" modules > "$mod/build.log" 2>&1 ||
    { tail -40 "$mod/build.log" >&2; log "ERROR: module build failed (log: $mod/build.log)"; exit 1; }
  if grep -E 'warning:|error:' "$mod/build.log" >&2; then
    log "ERROR: the module build warns (log: $mod/build.log)"; exit 1
  fi
  [ -e "$mod/fs/fuse/fuse.ko" ] || { log "ERROR: no fuse.ko built"; exit 1; }
  touch "$mod/.stripefs-done"
fi
got=$(modinfo -F vermagic "$mod/fs/fuse/fuse.ko" | awk '{print $1}')
[ "$got" = "$krel" ] || { log "ERROR: patched fuse.ko vermagic $got != kernel $krel"; exit 1; }

if [ $check_patches = 1 ]; then
  cp_pl=$(ls "$cache"/src/*/linux-source-7.2/scripts/checkpatch.pl 2>/dev/null | tail -1 || true)
  if [ -z "$cp_pl" ]; then
    log "checkpatch: skipped (no linux-source-7.2 in the cache to take scripts/checkpatch.pl from)"
  else
    for p in "${patches[@]}"; do
      "$cp_pl" --no-tree --strict --quiet "$p" >&2 ||
        { log "ERROR: checkpatch complains about $(basename "$p")"; exit 1; }
    done
    log "checkpatch: ${#patches[@]} patches clean"
  fi
fi

tools=$("$here/../vm/build-tools.sh")
env=$cache/line-$line.env
cat > "$env" <<EOT
LINE=$line
KERNEL_VERSION=$ver
KERNEL_RELEASE=$krel
KERNEL_IMAGE=$image
KERNEL_HEADERS=$kdir
LINE_SOURCE=$vd/src
FUSE_KO_STOCK=$stock
FUSE_KO_PATCHED=$mod/fs/fuse/fuse.ko
TOOLS_DIR=$tools
PATCH_KEY=$pkey
EOT
log "done in $(( $(date +%s) - t0 )) s: $env"
echo "$env"
