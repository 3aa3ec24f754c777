#!/usr/bin/env bash
# Installs the Debian bookworm packages stripefs needs to build, test and benchmark.
# Idempotent: checks what is installed first, installs only what is missing, and never
# upgrades unrelated packages. Usage: scripts/install-deps.sh [--with-kernel] [--quiet]
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libisal-dev liburing-dev libfuse3-dev fuse3 librocksdb-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev libssl-dev
  libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  clang clang-format clang-tidy libclang-rt-14-dev
  prometheus-cpp-dev libsystemd-dev
  fio iproute2 python3 python3-matplotlib kmod procps psmisc
  acl  # setfacl/getfacl: the POSIX ACL and multi-user mount tests
  systemd  # systemd-analyze: systemd_units_verify
  etcd-server etcd-client libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev
  protobuf-compiler golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
  linux-perf  # bench write: syncs per MiB and --profile
  dpkg-dev  # dpkg-shlibdeps: the stripefs .deb's Depends (package_deb_install)
)
KERNEL_PKGS=(
  qemu-system-x86 busybox-static cpio bc bison flex libelf-dev libssl-dev
  dwarves xz-utils zstd rsync dkms
)

with_kernel=0
for a in "$@"; do
  case "$a" in
    --with-kernel) with_kernel=1 ;;
    --quiet) ;;
    *) echo "install-deps.sh: unknown option '$a' (use --with-kernel)" >&2; exit 2 ;;
  esac
done
want=("${PKGS[@]}")
[ "$with_kernel" = 1 ] && want+=("${KERNEL_PKGS[@]}")

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh lists only if they look stale or absent (apt-cache knows nothing yet).
if ! apt-cache show libisal-dev >/dev/null 2>&1; then $SUDO apt-get update -q; fi
if ! $SUDO apt-get install -y -q --no-install-recommends --no-upgrade "${missing[@]}"; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends --no-upgrade "${missing[@]}"
fi
