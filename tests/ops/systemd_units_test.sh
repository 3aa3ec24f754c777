#!/usr/bin/env bash
# `systemd-analyze verify` on packaging/systemd/*: every unit (templates as
# an instance) must verify with no message at all, since verify reports
# many mistakes (a bad Type=, an unknown key) only as warnings with exit 0.
# ExecStart points at the stripefs binary of this build. Skips (exit 77)
# when systemd-analyze is missing. Usage: systemd_units_test.sh SRC STRIPEFS
set -euo pipefail
src=$1 bin=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
verify() {  # prints what verify said; fails on any message or exit code
  local out rc=0
  out=$(cd "$work" && systemd-analyze verify --man=no "$@" 2>&1) || rc=$?
  printf '%s' "$out"
  [ "$rc" = 0 ] && [ -z "$out" ]
}
# verify must notice a broken unit here, or passing proves nothing.
printf '[Service]\nType=bogus\nExecStart=%s --version\n' "$bin" >"$work/broken.service"
if verify ./broken.service >/dev/null; then
  echo "FAIL: systemd-analyze verify accepted a unit with Type=bogus"
  exit 1
fi
rm "$work/broken.service"
units=()
for u in "$src"/packaging/systemd/*.service; do
  name=$(basename "$u")
  inst=${name/@.service/@1.service}
  sed "s#/usr/local/bin/stripefs#$bin#g" "$u" >"$work/$inst"
  units+=("./$inst")
done
[ "${#units[@]}" -ge 3 ] || { echo "FAIL: expected 3 units, found ${#units[@]}"; exit 1; }
if ! verify "${units[@]}"; then
  echo
  echo "FAIL: systemd-analyze verify complained about ${units[*]}"
  exit 1
fi
echo "ok: ${units[*]} verify cleanly"
