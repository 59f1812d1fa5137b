#!/usr/bin/env bash
# Run lakemount's whole test suite (slow suites included), installing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
exec .venv/bin/python -m pytest -q "$@"
