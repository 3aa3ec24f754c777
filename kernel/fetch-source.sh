#!/usr/bin/env bash
# Fetches the newest Debian linux-source of a kernel line through a PRIVATE apt configuration
# (a sources.list of the repo + state/cache dirs under the kernel cache) and extracts it.
# The machine's own apt sources and state are never read or written.
# Usage: kernel/fetch-source.sh [LINE]  prints the extracted source dir on stdout (last line)
#   no LINE: linux-source-7.2 from Debian sid (kernel/apt/sources.list, state in CACHE/apt);
#   LINE: kernel/lines/LINE/line.conf's LINE_SOURCE_PKG from its LINE_APT_SOURCES (e.g.
#   debian13: linux-source-6.12 from trixie), state in CACHE/lines/LINE/apt (as build-line.sh).
# Env:   STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel)
#        STRIPEFS_KERNEL_OFFLINE=1 use the newest already-extracted source, no network
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
line=${1:-}
if [ -n "$line" ]; then
  [ -f "$here/lines/$line/line.conf" ] || { echo "fetch-source: no line $line" >&2; exit 2; }
  # shellcheck disable=SC1090
  . "$here/lines/$line/line.conf"
  pkg=$LINE_SOURCE_PKG
  sources=$here/lines/$line/$LINE_APT_SOURCES
  st=$cache/lines/$line/apt
  what="$LINE_DESC, $LINE_APT_SOURCES of kernel/lines/$line"
else
  pkg=linux-source-7.2
  sources=$here/apt/sources.list
  st=$cache/apt
  what="Debian sid main"
fi
mkdir -p "$st/state/lists/partial" "$st/cache/archives/partial" "$st/etc/sources.list.d" \
  "$st/etc/preferences.d" "$cache/src"
[ -e "$st/state/status" ] || : > "$st/state/status"
APT_OPTS=(
  -o "Dir::Etc::SourceList=$sources"
  -o "Dir::Etc::SourceParts=$st/etc/sources.list.d"
  -o "Dir::Etc::Preferences=$st/etc/preferences"
  -o "Dir::Etc::PreferencesParts=$st/etc/preferences.d"
  -o "Dir::State=$st/state"
  -o "Dir::State::status=$st/state/status"
  -o "Dir::Cache=$st/cache"
  -o "APT::Sandbox::User=root"
  -o "Debug::NoLocking=1"
)
log() { echo "fetch-source: $*" >&2; }

newest_cached() {
  ls -d "$cache"/src/*/"$pkg"/.stripefs-extracted 2>/dev/null |
    sed "s#/$pkg/.stripefs-extracted##" | xargs -r -n1 basename |
    sort -V | tail -1
}

ver=""
if [ "${STRIPEFS_KERNEL_OFFLINE:-0}" != 1 ]; then
  lists=$(ls "$st/state/lists/"*_Packages* 2>/dev/null | head -1 || true)
  if [ -z "$lists" ] || [ -n "$(find "$lists" -mmin +720 2>/dev/null)" ]; then
    log "apt-get update (private config, $what)"
    if ! apt-get "${APT_OPTS[@]}" -q update >&2; then
      log "WARNING: apt-get update failed (offline?)"
    fi
  fi
  # Newest available version of the package.
  for v in $(apt-cache "${APT_OPTS[@]}" madison "$pkg" 2>/dev/null | awk -F'|' '{gsub(/ /,"",$2); print $2}'); do
    if [ -z "$ver" ] || dpkg --compare-versions "$v" gt "$ver"; then ver=$v; fi
  done
fi
if [ -z "$ver" ]; then
  ver=$(newest_cached)
  if [ -z "$ver" ]; then
    log "ERROR: $pkg is not available from $sources and no"
    log "       cached copy exists under $cache/src. Check network access to deb.debian.org,"
    log "       or whether the suite moved past the line's kernel (then update the sources and the series)."
    exit 1
  fi
  log "using cached $pkg $ver (no package index available)"
fi
dir=$cache/src/$ver
if [ ! -e "$dir/$pkg/.stripefs-extracted" ]; then
  mkdir -p "$dir"
  deb=$(ls "$dir"/${pkg}_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    log "downloading $pkg=$ver"
    (cd "$dir" && apt-get "${APT_OPTS[@]}" -q download "$pkg=$ver" >&2)
    deb=$(ls "$dir"/${pkg}_*.deb | head -1)
  fi
  log "extracting $deb"
  rm -rf "$dir/x" "${dir:?}/${pkg:?}"
  dpkg-deb -x "$deb" "$dir/x"
  tar -C "$dir" -xJf "$dir/x/usr/src/$pkg.tar.xz"
  rm -rf "$dir/x"
  echo "$ver" > "$dir/$pkg/.stripefs-extracted"
fi
log "$pkg $ver at $dir/$pkg"
echo "$dir/$pkg"
