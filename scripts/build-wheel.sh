#!/usr/bin/env bash
# Builds the ibpool wheel and a wheelhouse holding it and every dependency (what an air-gapped fleet
# installs from: docs/deploy.md), then proves the wheelhouse is enough: a fresh virtual environment
# installs ibpool from it alone (`--no-index`) and runs `ibpool --version`.
#   bash scripts/build-wheel.sh [OUT]      # OUT defaults to dist; the wheelhouse is OUT/wheelhouse
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
py=.venv/bin/python
[ -x "$py" ] || py=python3
rm -rf "$out/wheelhouse"
mkdir -p "$out/wheelhouse"
"$py" -m pip wheel -q --disable-pip-version-check --wheel-dir "$out/wheelhouse" .
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
python3 -m venv "$check/venv"
"$check/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index \
  --find-links "$out/wheelhouse" ibpool
version=$("$check/venv/bin/ibpool" --version)
echo "built $(ls "$out"/wheelhouse/ibpool-*.whl) with $(ls "$out/wheelhouse" | wc -l) wheels; installed offline: $version"
