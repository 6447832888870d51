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
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
