#!/usr/bin/env bash
# Boots the stripefs kernel test guest under QEMU TCG, loads the stock or patched fuse.ko,
# runs one test script from kernel/vm/tests and exits with its status.
# Usage: kernel/vm/run.sh --module stock|patched [--line LINE] [--timeout SEC] [--mem MiB]
#                         [--smp N] [--out FILE] [--modparams "k=v ..."] [--stripefs BIN]
#                         TEST [ARGS...]
#   TEST is kernel/vm/tests/TEST.sh; ARGS are passed to it inside the guest.
#   --stripefs BIN: put this stripefs binary (debug info stripped) and its shared libraries
#   in the guest as /bin/stripefs; product_* tests need it (default: $STRIPEFS_BIN, else
#   build/tools/stripefs of this checkout).
#   --line LINE boots the distribution's own kernel image of kernel/lines/LINE with its stock
#   or patched (out-of-tree built) fuse.ko (kernel/lines/build-line.sh), or, for a line whose
#   kernel builds FUSE in (debian13), that line's tinyconfig guest rebuilt from the
#   distribution's source (kernel/build.sh --line LINE); without it, the 7.2 tinyconfig guest.
#   --ko FILE loads FILE instead of the build's module (e.g. the DKMS-built fuse.ko of
#   packaging/dkms/ci-dkms.sh); --module still says which behaviour the test expects.
#   Exit status: the test's, 77 if qemu cannot run here (skip), 124 on timeout.
# Needs the artifacts of kernel/build.sh (run it first; this script runs it if none exist);
# STRIPEFS_KERNEL_ENV=FILE picks one build's env file instead of the cache's current.env.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
module="" line="" ko_override="" timeout_s=600 mem=1024 smp=2 out="" modparams=""
stripefs_bin=${STRIPEFS_BIN:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --module) module=$2; shift 2 ;;
    --line) line=$2; shift 2 ;;
    --ko) ko_override=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --modparams) modparams=$2; shift 2 ;;
    --stripefs) stripefs_bin=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    --*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "run.sh: missing TEST (one of: $(cd "$here/tests" && ls *.sh | sed 's/\.sh$//' | grep -v '^lib$' | tr '\n' ' '))" >&2; exit 2; }
test_name=$1; shift
[ -f "$here/tests/$test_name.sh" ] || { echo "run.sh: no test $here/tests/$test_name.sh" >&2; exit 2; }
case "$module" in stock|patched) ;; *) echo "run.sh: --module stock|patched required" >&2; exit 2 ;; esac
case "$test_name" in
  product_*)
    [ -n "$stripefs_bin" ] || stripefs_bin=$here/../../build/tools/stripefs
    [ -x "$stripefs_bin" ] || {
      echo "run.sh: $test_name runs stripefs in the guest, but $stripefs_bin is not built: run \`cmake --build build --target stripefs\` or pass --stripefs BIN" >&2
      exit 2
    } ;;
esac

qemu=$(command -v qemu-system-x86_64 || true)
if [ -z "$qemu" ]; then
  echo "SKIP: qemu-system-x86_64 is not installed (scripts/install-deps.sh --with-kernel)" >&2
  exit 77
fi
busybox=/bin/busybox
[ -x "$busybox" ] || busybox=$(command -v busybox || true)
bb_ldd=$(LC_ALL=C ldd "$busybox" 2>&1 || true)
if [ -z "$busybox" ] || ! echo "$bb_ldd" | grep -q 'not a dynamic'; then
  echo "SKIP: a static busybox is needed for the guest (apt install busybox-static)" >&2
  exit 77
fi

if [ -n "$line" ]; then
  [ -f "$here/../lines/$line/line.conf" ] ||
    { echo "run.sh: no kernel line '$line' (kernel/lines/*/line.conf)" >&2; exit 2; }
  envf=${STRIPEFS_KERNEL_ENV:-$cache/line-$line.env}
  if [ ! -e "$envf" ]; then
    if grep -qx 'LINE_BUILDER=kernel/build.sh' "$here/../lines/$line/line.conf"; then
      echo "run.sh: no build artifacts for line $line yet, running kernel/build.sh --line $line" >&2
      "$here/../build.sh" --line "$line" >/dev/null
    else
      echo "run.sh: no build artifacts for line $line yet, running kernel/lines/build-line.sh" >&2
      "$here/../lines/build-line.sh" "$line" >/dev/null
    fi
  fi
else
  envf=${STRIPEFS_KERNEL_ENV:-$cache/current.env}
  if [ ! -e "$envf" ]; then
    echo "run.sh: no build artifacts yet, running kernel/build.sh" >&2
    "$here/../build.sh" >/dev/null
  fi
fi
# shellcheck disable=SC1090
. "$envf"
ko=$FUSE_KO_STOCK; [ "$module" = patched ] && ko=$FUSE_KO_PATCHED
if [ -n "$ko_override" ]; then
  [ -f "$ko_override" ] || { echo "run.sh: --ko $ko_override: no such file" >&2; exit 2; }
  ko=$ko_override
fi

work=$(mktemp -d /tmp/stripefs-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,lib,tools,tests,proc,sys,dev,tmp,mnt,run,etc}
ln -s /proc/mounts "$root/etc/mtab"
cp "$busybox" "$root/bin/busybox"
cp "$here/init.sh" "$root/init"
chmod +x "$root/init"
cp "$ko" "$root/lib/fuse.ko"
cp "$TOOLS_DIR"/* "$root/tools/" 2>/dev/null || true
rm -f "$root/tools/.stripefs-done"
cp "$here"/tests/*.sh "$root/tests/"
{
  echo "TEST='$test_name'"
  echo "MODULE='$module'"
  echo "MODPARAMS='$modparams'"
  printf "ARGS='%s'\n" "$*"
} > "$root/config"
(cd "$root" && find . | cpio -o -H newc --quiet) > "$work/initramfs.cpio"
if [ -n "$stripefs_bin" ]; then
  # The kernel unpacks concatenated cpio archives in order: the stripefs part (binary +
  # libraries, tens of MiB) is built once per binary and reused by every boot.
  sroot=$("$here/stripefs-root.sh" "$stripefs_bin" "$cache") || exit 1
  cat "$sroot" >> "$work/initramfs.cpio"
fi

echo "run.sh: booting $KERNEL_RELEASE (${LINE:-sid 7.2} $KERNEL_VERSION), $module fuse.ko ($ko), test $test_name $*" >&2
echo "run.sh: QEMU TCG (no KVM): timings inside the guest are not throughput figures" >&2
log=$work/console.log
set +e
# no_timer_check: under TCG on a loaded host the IO-APIC timer check can miss its ticks and
# panic the boot ("IO-APIC + timer doesn't work!"); the guest needs no such check.
timeout --foreground -k 10 "$timeout_s" "$qemu" -accel tcg,thread=multi -cpu max -smp "$smp" \
  -m "$mem" -nographic -no-reboot -nic none \
  -kernel "$KERNEL_IMAGE" -initrd "$work/initramfs.cpio" \
  -append "console=ttyS0 loglevel=4 panic=-1 oops=panic no_timer_check" < /dev/null 2>&1 | tee "$log"
qrc=${PIPESTATUS[0]}
set -e
[ -n "$out" ] && cp "$log" "$out"
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
  echo "run.sh: TIMEOUT after ${timeout_s}s (test $test_name, $module)" >&2
  exit 124
fi
res=$(grep -a 'STRIPEFS_RESULT' "$log" | tail -1 | sed -n 's/.* rc=\([0-9]*\).*/\1/p' | tr -d '\r')
if [ -z "$res" ]; then
  echo "run.sh: guest ended without a result (qemu rc=$qrc): boot or test crashed, see output above" >&2
  exit 1
fi
echo "run.sh: test $test_name on $module module: rc=$res" >&2
exit "$res"
