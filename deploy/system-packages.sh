#!/usr/bin/env bash
# The Debian packages the tests start by themselves: PostgreSQL (SQL store tests) and Chromium
# (job page browser tests). Installed when missing and we are root with apt-get; otherwise the
# tests that need them skip and say why. Nothing here downloads from outside Debian's archive.
set -euo pipefail
wanted=(postgresql chromium)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-packages: missing ${missing[*]} (not root or no apt-get); their tests will skip" >&2
  exit 0
fi
echo "system-packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
