#!/usr/bin/env bash
# Run lakemount's whole test suite (slow suites included), installing it and the test tools first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --test
exec .venv/bin/python -m pytest -q "$@"
