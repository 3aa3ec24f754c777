#!/usr/bin/env bash
# The stripefs .deb as a user installs it: built from this tree with CPack, `dpkg -i`,
# then mount(8) finds the installed helper (`mount -t fuse.stripefs`), a file survives a
# remount, and `dpkg --purge` takes every file back. The machine's package state is
# restored (trap); a stripefs package or a mount helper that is already here is left alone
# and the test skips loudly. Usage: package_deb_test.sh BUILD_DIR
set -euo pipefail
build=$1
helper=/sbin/mount.fuse.stripefs
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (dpkg -i, mount)"; exit 77; }
command -v dpkg-shlibdeps >/dev/null || fail "dpkg-shlibdeps missing (Debian package dpkg-dev)"
status=$(dpkg-query -W -f='${Status}' stripefs 2>/dev/null || true)
case "$status" in
  *" installed") echo "SKIP: a stripefs package is already installed on this machine"; exit 77 ;;
esac
if [ -e "$helper" ] || [ -L "$helper" ]; then
  echo "SKIP: another mount helper is at $helper (not from a package; left alone)"
  exit 77
fi

work=$(mktemp -d /tmp/stripefs-deb.XXXXXX)
installed=0
cleanup() {
  for m in "$work/mnt"; do
    grep -q " $m fuse" /proc/mounts && umount "$m" 2>/dev/null || true
  done
  if [ $installed = 1 ]; then dpkg --purge stripefs > /dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out") \
  > "$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(find "$work/out" -maxdepth 1 -name 'stripefs_*.deb' | head -1)
[ -n "$deb" ] || { cat "$work/cpack.log"; fail "cpack made no stripefs_*.deb"; }

# What it declares and carries, before installing.
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libfuse3 librocksdb libisal liburing libssl fuse3; do
  grep -q "$lib" <<< "$depends" || fail "Depends lacks $lib (shlibdeps?): $depends"
done
dpkg-deb -c "$deb" > "$work/contents"
for f in ./usr/bin/stripefs "./sbin/mount.fuse.stripefs -> /usr/bin/stripefs" \
         ./lib/systemd/system/stripefs-metad.service \
         ./lib/systemd/system/stripefs-chunkd@.service \
         ./lib/systemd/system/stripefs-mount@.service ./usr/share/doc/stripefs/filesystem.md; do
  grep -qF "$f" "$work/contents" || fail "the package lacks $f"
done

dpkg -i "$deb" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i $deb failed"; }
installed=1
[ "$(readlink "$helper")" = /usr/bin/stripefs ] || fail "$helper is not a link to /usr/bin/stripefs"
/usr/bin/stripefs --version > /dev/null || fail "the installed stripefs does not run"
grep -q '^ExecStart=/usr/bin/stripefs ' /lib/systemd/system/stripefs-metad.service ||
  fail "the installed metad unit does not run /usr/bin/stripefs"

# An embedded volume through mount(8) and the installed helper, twice.
mkdir "$work/mnt"
/usr/bin/stripefs mkfs "$work/vol" > /dev/null || fail "stripefs mkfs failed"
mount_it() {
  timeout 60 mount -t fuse.stripefs "$work/vol" "$work/mnt" -o nosuid,relatime ||
    fail "mount -t fuse.stripefs failed"
  grep -q " $work/mnt fuse.stripefs " /proc/mounts || fail "/proc/mounts has no fuse.stripefs mount"
}
mount_it
head -c 3000000 /dev/urandom > "$work/data"
cp "$work/data" "$work/mnt/f"
timeout 60 umount "$work/mnt" || fail "umount failed"
mount_it
cmp "$work/data" "$work/mnt/f" || fail "the file differs after a remount"
timeout 60 umount "$work/mnt" || fail "umount failed"

dpkg --purge stripefs > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge failed"; }
installed=0
for f in /usr/bin/stripefs "$helper" /lib/systemd/system/stripefs-metad.service; do
  [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f is still there after dpkg --purge"
done
echo "PASS: $(basename "$deb") installs, mounts through mount(8), keeps a file, purges clean"
