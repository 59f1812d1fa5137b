#!/usr/bin/env bash
# Run lakemount's test suite, installing it and the test tools first.
#   scripts/test.sh [PYTEST ARGS...]          the whole suite, slow tiers included (what CI runs)
#   scripts/test.sh --fast [PYTEST ARGS...]   the day-to-day tier: no JVM, no browser, no cluster harness, no slow suite
# The tiers are markers tests/tiers.py sets from what each test starts (docs/TESTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST="not spark and not browser and not cluster and not slow"
select=()
if [ "${1:-}" = "--fast" ]; then
  shift
  select=(-m "$FAST")
fi
scripts/install.sh --test
exec .venv/bin/python -m pytest -q "${select[@]}" "$@"
