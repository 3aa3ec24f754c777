#!/usr/bin/env bash
# CI check of the DKMS package: builds stripefs-fuse-dkms, and runs `dkms add` + `dkms build`
# on its source tree against each line's distribution headers (extracted by
# kernel/lines/build-line.sh, never installed: private --dkmstree/--sourcetree, so the
# machine's /var/lib/dkms, /usr/src and /lib/modules are not touched). Checks that every
# built fuse.ko has the kernel's vermagic and carries the series (the opt-alignment patch's message).
# Usage: packaging/dkms/ci-dkms.sh OUTDIR   writes OUTDIR/dkms-<line>.ko per line and prints
#        one "LINE KO" line per line on stdout. Exit 77 if dkms is not installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: ci-dkms.sh OUTDIR}
command -v dkms > /dev/null ||
  { echo "SKIP: dkms is not installed (scripts/install-deps.sh --with-kernel)" >&2; exit 77; }
mkdir -p "$out"
t=$(mktemp -d /tmp/stripefs-dkms-ci.XXXXXX)
trap 'rm -rf "$t"' EXIT
deb=$("$here/build-deb.sh" "$t" | tail -1)
dpkg-deb -x "$deb" "$t/root"
ver=$(dpkg-deb -f "$deb" Version)
D=(--dkmstree "$t/dkms" --sourcetree "$t/root/usr/src" --installtree "$t/install")
mkdir -p "$t/dkms" "$t/install"
dkms add "${D[@]}" -m stripefs-fuse -v "$ver" >&2
for line in $(awk '!/^#/ && NF == 2 { print $2 }' "$here/kernel-mapping.txt" | sort -u); do
  env=$(STRIPEFS_KERNEL_OFFLINE=${STRIPEFS_KERNEL_OFFLINE:-0} "$root/kernel/lines/build-line.sh" "$line" | tail -1)
  krel=$(sed -n 's/^KERNEL_RELEASE=//p' "$env")
  kdir=$(sed -n 's/^KERNEL_HEADERS=//p' "$env")
  if ! dkms build "${D[@]}" -m stripefs-fuse -v "$ver" -k "$krel" --kernelsourcedir "$kdir" >&2; then
    cat "$t/dkms/stripefs-fuse/$ver/build/make.log" >&2 2>/dev/null || true
    echo "ci-dkms: FAIL: dkms build for $line ($krel)" >&2
    exit 1
  fi
  ko=$(find "$t/dkms/stripefs-fuse/$ver/$krel" -name 'fuse.ko*' | head -1)
  case "$ko" in
    *.xz) xz -dc "$ko" > "$out/dkms-$line.ko" ;;
    *.zst) zstd -q -dc "$ko" > "$out/dkms-$line.ko" ;;
    *) cp "$ko" "$out/dkms-$line.ko" ;;
  esac
  vm=$(modinfo -F vermagic "$out/dkms-$line.ko" | awk '{print $1}')
  [ "$vm" = "$krel" ] || { echo "ci-dkms: FAIL: $line: vermagic $vm, kernel $krel" >&2; exit 1; }
  # grep -a on the file itself: `strings | grep -q` under pipefail fails when grep's early
  # exit hands strings a SIGPIPE (a race that failed CI once).
  grep -qa 'ignoring align_page_order' "$out/dkms-$line.ko" ||
    { echo "ci-dkms: FAIL: $line: the DKMS fuse.ko lacks the series (no align_page_order message)" >&2; exit 1; }
  echo "ci-dkms: $line: dkms build for $krel ok" >&2
  echo "$line $out/dkms-$line.ko"
done
