# Sourced by scripts/install_spark_*.sh: what their separate Spark venvs share.
# Needs say() defined by the caller.

quiet() { # a command with its chatter (e.g. pip's warnings about absent local indexes) shown only on failure
  local log rc=0
  log=$(mktemp)
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then cat "$log" >&2; fi
  rm -f "$log"
  return "$rc"
}

pyspark_venv() { # venv python version what-it-costs -> the venv exists and holds pyspark==version
  local venv=$1 py=$2 version=$3 cost=$4
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    "$py" -m venv "$venv"
  fi
  if ! "$venv/bin/python" - "$version" <<'PYEOF' 2>/dev/null; then
import sys
from importlib.metadata import version
sys.exit(0 if version("pyspark") == sys.argv[1] else 1)
PYEOF
    say "installing pyspark==$version into $venv ($cost)"
    quiet "$venv/bin/pip" install -q --disable-pip-version-check "pyspark==$version"
  fi
}
