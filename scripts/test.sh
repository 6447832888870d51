#!/usr/bin/env bash
# Sets up and runs every check: lint, types, unit and integration tests. As root on Debian 12 it first
# installs the Debian packages the integration tests start (prometheus, node_exporter, ibsim, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  bash scripts/install-system-deps.sh
fi
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
