#!/usr/bin/env bash
# Run lakemount's test suite, installing it and the test tools first.
#   scripts/test.sh [PYTEST ARGS...]          the whole suite, slow tiers included (what CI runs)
#   scripts/test.sh --fast [PYTEST ARGS...]   the day-to-day tier: no JVM, no browser, no cluster harness, no slow suite,
#                                             and a quarter of each hypothesis state machine's examples
#                                             (LAKEMOUNT_TEST_TIER=fast, tests/budget.py; the whole suite runs them all)
# The tiers are markers tests/tiers.py sets from what each test starts (docs/TESTING.md).
#
# Two passes: the cluster harness's tests (marker `cluster`: network namespaces, their own PostgreSQL, S3 and
# Spark cluster, faults held by the clock) alone, one at a time; then every other test on $LAKEMOUNT_TEST_WORKERS
# pytest-xdist workers (default 3, measured in docs/TESTING.md; tests/workers.py hands each worker whole modules).
# A pass that selects no test is skipped over (pytest's status 5); the script fails if either pass failed.
# LAKEMOUNT_TEST_WORKERS=0: one plain pytest run of everything, as before the workers.
# `-m EXPR` is combined with each pass's own selection; `--junitxml=PATH` writes the lone pass to PATH.alone.xml
# (scripts/durations.py reads both).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST="not spark and not browser and not cluster and not slow"
WORKERS=${LAKEMOUNT_TEST_WORKERS:-3}
base=""
if [ "${1:-}" = "--fast" ]; then
  shift
  base=$FAST
  export LAKEMOUNT_TEST_TIER=fast
else
  unset LAKEMOUNT_TEST_TIER  # the whole suite (CI) runs every machine's full count of examples
fi
scripts/install.sh --test
# pytest keeps each test module's rewritten asserts in __pycache__ only when bytecode may be written: with
# PYTHONDONTWRITEBYTECODE set every worker rewrote every module again, ~16 of a collection's ~27 s of CPU
# (docs/TESTING.md, "Where the CPU goes"); the servers and CLIs the tests start reuse lakemount's bytecode too.
unset PYTHONDONTWRITEBYTECODE

# The caller's -m (its last, as pytest takes it) joins each pass's selection; the other arguments go to both passes.
user="" args=() alone_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m) user=$2; shift 2 ;;
    --junitxml=*) args+=("$1"); alone_args+=("--junitxml=${1#--junitxml=}.alone.xml"); shift ;;
    *) args+=("$1"); alone_args+=("$1"); shift ;;
  esac
done
both() { # expressions... -> them joined by "and", each in parentheses, the empty ones left out
  local out="" e
  for e in "$@"; do
    [ -n "$e" ] || continue
    out=${out:+$out and }"($e)"
  done
  echo "$out"
}

if [ "$WORKERS" = 0 ]; then
  select=()
  expr=$(both "$base" "$user")
  [ -z "$expr" ] || select=(-m "$expr")
  exec .venv/bin/python -m pytest -q "${select[@]}" "${args[@]}"
fi

# The harness's cluster tests: alone, so that no other test's load meets their faults (the fast tier has none).
alone=5 others="not cluster"
if [ "$base" = "$FAST" ]; then
  others=""
else
  alone=0
  .venv/bin/python -m pytest -q -m "$(both "$base" "$user" cluster)" "${alone_args[@]}" || alone=$?
fi
rest=0
.venv/bin/python -m pytest -q -n "$WORKERS" -m "$(both "$base" "$user" "$others")" "${args[@]}" || rest=$?
for rc in "$alone" "$rest"; do
  [ "$rc" = 0 ] || [ "$rc" = 5 ] || exit "$rc"
done
if [ "$alone" = 5 ] && [ "$rest" = 5 ]; then exit 5; fi
exit 0
