#!/usr/bin/env bash
# Builds the static guest test tools (kernel/vm/*.c) once per source hash, outside the repo.
# Usage: kernel/vm/build-tools.sh    prints the tools directory on stdout
# Env:   STRIPEFS_KERNEL_CACHE (default /var/cache/stripefs-kernel)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRIPEFS_KERNEL_CACHE:-/var/cache/stripefs-kernel}
tkey=$(cat "$here"/*.c | sha256sum | cut -c1-12)
tools=$cache/tools-$tkey
if [ ! -e "$tools/.stripefs-done" ]; then
  mkdir -p "$tools"
  for c in "$here"/*.c; do
    n=$(basename "$c" .c)
    gcc -O2 -Wall -Wextra -Werror -static -pthread -o "$tools/$n" "$c" -luring
  done
  touch "$tools/.stripefs-done"
fi
echo "$tools"
