#!/usr/bin/env bash
# Builds the stripefs-fuse-dkms .deb: dkms.conf, dkms-make.sh, kernel-mapping.txt and, for
# every line in kernel-mapping.txt, that kernel's fs/fuse + uapi fuse.h with the line's
# patches applied (the kernel sources come from the distribution's linux-source package,
# fetched by kernel/lines/build-line.sh; nothing of them is kept in this repository).
# Usage: packaging/dkms/build-deb.sh [OUTDIR]   prints the .deb path (last stdout line)
# Env: STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$PWD}
ver=$(sed -n 's/^project(stripefs VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$ver" ] || { echo "build-deb: no project VERSION in CMakeLists.txt" >&2; exit 1; }
log() { echo "build-deb: $*" >&2; }
stage=$(mktemp -d /tmp/stripefs-dkms-deb.XXXXXX)
trap 'rm -rf "$stage"' EXIT
src=$stage/usr/src/stripefs-fuse-$ver
chmod 755 "$stage"
mkdir -p "$src/lines" "$stage/DEBIAN" "$stage/usr/share/doc/stripefs-fuse-dkms"
sed "s/@VERSION@/$ver/" "$here/dkms.conf.in" > "$src/dkms.conf"
cp "$here/dkms-make.sh" "$here/kernel-mapping.txt" "$src/"
for line in $(awk '!/^#/ && NF == 2 { print $2 }' "$here/kernel-mapping.txt" | sort -u); do
  env=$("$root/kernel/lines/build-line.sh" "$line" | tail -1)
  lsrc=$(sed -n 's/^LINE_SOURCE=//p' "$env")
  mkdir -p "$src/lines/$line"
  cp -a "$lsrc/fs" "$lsrc/include" "$src/lines/$line/"
  for p in "$root/kernel/lines/$line"/patches/*.patch; do
    patch -d "$src/lines/$line" -p1 --quiet -F0 < "$p"
  done
  find "$src/lines/$line" -name '*.orig' -delete
  (cd "$root/kernel/lines/$line/patches" && ls *.patch) > "$src/lines/$line/series"
  log "line $line: $(wc -l < "$src/lines/$line/series") patches on $(sed -n 's/^KERNEL_VERSION=//p' "$env")"
done
cat > "$stage/DEBIAN/control" <<EOT
Package: stripefs-fuse-dkms
Version: $ver
Architecture: all
Section: kernel
Priority: optional
Maintainer: stripefs <kernel@stripefs.invalid>
Depends: dkms (>= 3.0)
Description: stripefs fuse.ko (opt-alignment of writeback WRITEs) as DKMS module
 Builds FUSE with the stripefs series (FUSE_ALIGN_PG_ORDER opt-alignment, stripe
 hold-back at EOF, and the direct-IO page cache invalidation where the kernel lacks
 it) for the running kernel and installs it under /lib/modules/<kernel>/updates/,
 replacing the distribution's fuse.ko. Kernels: see
 /usr/src/stripefs-fuse-$ver/kernel-mapping.txt.
EOT
cat > "$stage/DEBIAN/postinst" <<EOT
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  /usr/lib/dkms/common.postinst stripefs-fuse $ver "" "" "\$2"
fi
exit 0
EOT
cat > "$stage/DEBIAN/prerm" <<EOT
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = upgrade ] || [ "\$1" = deconfigure ]; then
  dkms remove -m stripefs-fuse -v $ver --all || true
fi
exit 0
EOT
chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm"
cat > "$stage/usr/share/doc/stripefs-fuse-dkms/copyright" <<EOT
The files under /usr/src/stripefs-fuse-$ver/lines are the Linux kernel's fs/fuse and
include/uapi/linux/fuse.h from the distribution's linux-source package with the stripefs
patch series applied: GPL-2.0 (include/uapi: GPL-2.0 WITH Linux-syscall-note, or BSD-2-Clause
as the file says). The DKMS glue (dkms.conf, dkms-make.sh, kernel-mapping.txt): GPL-2.0.
EOT
mkdir -p "$out"
deb=$out/stripefs-fuse-dkms_${ver}_all.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >&2
echo "$deb"
