#!/usr/bin/env bash
# Install what running lakemount needs (not the test tools), then bring lakemount up on embedded defaults with a demo repository.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
exec .venv/bin/lakemount up "$@"
