#!/usr/bin/env bash
# The Debian packages the tests start by themselves: PostgreSQL (SQL store tests), promtool
# (package prometheus: deploy/monitoring's alert rules are checked and unit-tested), Chromium
# (job page browser tests) and kubectl (tests/activities/test_publish_consumable.py builds
# published roots with it, the way a cluster's Argo CD or Flux would, independently of the
# engine's own kubectl from PyPI). Installed when missing and we are root with apt-get; otherwise the tests that
# need them skip and say why. Nothing here adds an apt source: kubectl comes from whatever
# source the machine already has (Kubernetes' or Google Cloud's apt repository; Debian's own
# archive does not carry it).
set -euo pipefail
wanted=(postgresql chromium kubectl prometheus)
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
# A package no configured source has (kubectl without its repository) must not stop the rest.
for pkg in "${missing[@]}"; do
  apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
    echo "system-packages: $pkg is not available from this machine's apt sources; its tests will skip" >&2
done
