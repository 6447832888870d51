#!/usr/bin/env bash
# Creates .venv and installs ibpool with its development tools. Uses Debian's Python when present, with
# system site-packages, so that Debian's pyverbs (python3-pyverbs) is importable.
set -euo pipefail
cd "$(dirname "$0")/.."
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
  if ! "$py" -m venv --system-site-packages .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get update -q && apt-get install -y -q python3-venv
      "$py" -m venv --system-site-packages .venv
    else
      echo "cannot create a virtual environment: install python3-venv" >&2
      exit 1
    fi
  fi
fi
# The demo replays the shipped alert rules with vmalert over a private VictoriaMetrics (both in Debian's
# victoria-metrics package). As root with apt-get, install it when missing; otherwise the demo runs without
# alerts and says so ("alerts not replayed: vmalert not installed").
if ! command -v vmalert >/dev/null || ! command -v victoria-metrics >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if [ ! -e /usr/sbin/policy-rc.d ]; then  # no service started by the package (as install-system-deps.sh)
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
      chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends victoria-metrics
  else
    echo "note: vmalert/victoria-metrics not installed (Debian package victoria-metrics): the demo will not replay its alerts" >&2
  fi
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
