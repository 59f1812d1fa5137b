#!/usr/bin/env bash
# Run the same tests RUNS times in a row, optionally beside CPU hogs, and count the runs that failed.
#
#   scripts/flake_loop.sh [-n RUNS] [-j HOGS] [-o DIR] [-f FILE] PYTEST_ARGS...
#
# -n RUNS  how many times pytest runs the selection (default 20)
# -j HOGS  busy-loop processes started beside it for the whole loop (default 0), killed at the end
# -o DIR   where each failed run's output is kept (default: a new directory under /tmp)
# -f FILE  more pytest arguments, one a line, # for comments (tests/flake_loop.txt: the race, fault and
#          concurrency tests); each failed run also prints how often each test has failed so far
#
# Prints one line per run and then "runs=N failures=F"; exits 1 if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=20
hogs=0
out=""
args=()
while getopts "n:j:o:f:" opt; do
  case "$opt" in
    n) runs="$OPTARG" ;;
    j) hogs="$OPTARG" ;;
    o) out="$OPTARG" ;;
    f) while IFS= read -r line; do
         line="${line%%#*}"
         line="${line#"${line%%[![:space:]]*}"}"
         line="${line%"${line##*[![:space:]]}"}"
         [ -z "$line" ] || args+=("$line")
       done <"$OPTARG" ;;
    *) echo "usage: $0 [-n RUNS] [-j HOGS] [-o DIR] [-f FILE] PYTEST_ARGS..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
args+=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  echo "usage: $0 [-n RUNS] [-j HOGS] [-o DIR] [-f FILE] PYTEST_ARGS... (name the tests to repeat)" >&2
  exit 2
fi
out="${out:-$(mktemp -d /tmp/flake_loop.XXXXXX)}"
mkdir -p "$out"
rm -f "$out/failed-tests.txt"

hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${hog_pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  hog_pids=()
}
trap stop_hogs EXIT
for _ in $(seq 1 "$hogs"); do
  .venv/bin/python -c 'while 1: pass' &
  hog_pids+=("$!")
done

failures=0
for i in $(seq 1 "$runs"); do
  log="$out/run-$i.txt"
  start=$(date +%s)
  if .venv/bin/python -m pytest -q -p no:cacheprovider "${args[@]}" >"$log" 2>&1; then
    echo "run $i/$runs: passed ($(( $(date +%s) - start )) s): $(tail -n 1 "$log" | tr -d '=')"
    rm -f "$log"
  else
    failures=$((failures + 1))
    echo "run $i/$runs: FAILED ($(( $(date +%s) - start )) s), output in $log"
    grep -E "^(FAILED|ERROR) " "$log" | head -5
    grep -E "^(FAILED|ERROR) " "$log" | sed -E 's/^(FAILED|ERROR) ([^ ]+).*/\2/' >>"$out/failed-tests.txt"
  fi
done
echo "runs=$runs failures=$failures hogs=$hogs"
if [ -s "$out/failed-tests.txt" ]; then
  echo "failures per test (of $runs runs):"
  sort "$out/failed-tests.txt" | uniq -c | sort -rn
fi
[ "$failures" -eq 0 ]
