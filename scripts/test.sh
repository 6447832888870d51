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
# The slowest tests and the suite's wall time ("N passed in S s (H:MM:SS)") close the log.
.venv/bin/python -m pytest --durations=25 "$@"
