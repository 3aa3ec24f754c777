#!/usr/bin/env bash
# The main job: installs what is missing, builds stripefs, creates an embedded
# volume (metadata + 4+2 chunk stores in one local directory) and mounts it.
#   scripts/run.sh [VOLUME_DIR] [MOUNTPOINT] [extra `stripefs mount` options]
# Defaults: /var/tmp/stripefs/vol mounted at /mnt/stripefs. Unmount with
#   build/tools/stripefs umount MOUNTPOINT
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
vol=${1:-/var/tmp/stripefs/vol}
mnt=${2:-/mnt/stripefs}
shift $(( $# > 2 ? 2 : $# )) || true
"$top/scripts/build.sh"
bin="$top/build/tools/stripefs"
mkdir -p "$mnt"
if grep -qs " $mnt fuse" /proc/mounts; then
  echo "run.sh: $mnt is already mounted; showing its counters"
else
  "$bin" mount "$vol" "$mnt" "$@"
fi
"$bin" stat "$mnt"
echo
echo "stripefs volume $vol is mounted at $mnt."
echo "  counters:  $bin stat $mnt [--json]"
echo "  unmount:   $bin umount $mnt"
