#!/bin/sh
# DKMS MAKE step of stripefs-fuse-dkms: picks the kernel line for KERNELVER from
# kernel-mapping.txt and builds fs/fuse of that line (already patched) out of tree
# against KERNEL_SOURCE_DIR into ./build.
# Usage: dkms-make.sh KERNELVER KERNEL_SOURCE_DIR | dkms-make.sh clean
set -eu
cd "$(dirname "$0")"
if [ "${1:-}" = clean ]; then
  rm -rf build
  exit 0
fi
kver=${1:?usage: dkms-make.sh KERNELVER KERNEL_SOURCE_DIR}
ksrc=${2:?usage: dkms-make.sh KERNELVER KERNEL_SOURCE_DIR}
line=$(awk -v k="$kver" '!/^#/ && NF == 2 && k ~ $1 { print $2; exit }' kernel-mapping.txt)
if [ -z "$line" ] || [ ! -d "lines/$line" ]; then
  echo "stripefs-fuse: no line for kernel $kver in kernel-mapping.txt (lines:" \
    "$(ls lines | tr '\n' ' ')); this kernel keeps its own fuse" >&2
  exit 1
fi
if ! grep -q '^CONFIG_FUSE_FS=m' "$ksrc/.config" 2>/dev/null; then
  echo "stripefs-fuse: $kver does not build FUSE as a module (CONFIG_FUSE_FS=m in" \
    "$ksrc/.config): a fuse.ko cannot replace it" >&2
  exit 1
fi
echo "stripefs-fuse: building line $line for $kver"
rm -rf build
cp -a "lines/$line/fs/fuse" build
# The line's uapi fuse.h (with FUSE_ALIGN_PG_ORDER) is force-included so that it wins over
# the headers' copy (its include guard makes the later include a no-op).
make -C "$ksrc" M="$PWD/build" KCFLAGS="-include $PWD/lines/$line/include/uapi/linux/fuse.h" \
  modules
