#!/usr/bin/env bash
# Install the Debian packages listed in system-packages.txt that are not installed yet.
# Idempotent: does nothing (and needs no network) when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' system-packages.txt)
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "error: missing system packages: ${missing[*]} and no apt-get here; install them with your package manager" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
# --no-install-recommends keeps e.g. prometheus from pulling a web UI and services we do not use;
# policy-rc.d stops Debian from starting the daemons (tests start their own on loopback).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null; $SUDO chmod +x "$policy"; created_policy=1; fi
trap '[ "$created_policy" = 1 ] && $SUDO rm -f "$policy"' EXIT
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
