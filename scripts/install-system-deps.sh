#!/usr/bin/env bash
# Installs the Debian 12 packages ibpool's tests use (run as root). Services are not started here:
# the tests start the programs they need on loopback.
set -euo pipefail
packages=(
  python3 python3-venv python3-pyverbs openssl curl systemd
  prometheus prometheus-node-exporter prometheus-alertmanager victoria-metrics
  opensm ibsim-utils infiniband-diags slurm-wlm munge
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages (run this script as root): ${missing[*]}" >&2
  exit 1
fi
# Keep postinst scripts from trying to start services on a machine without an init system.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
