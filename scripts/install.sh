#!/usr/bin/env bash
# Install what lakemount needs on a fresh Debian 12 machine: Debian packages (as root, via apt-get)
# and Python packages (via pip, into the project's .venv).
#
#   scripts/install.sh            what running lakemount needs (scripts/up.sh)
#   scripts/install.sh --test     that, plus the test suite's tools, the `test` extras and the separate
#                                 Spark 3.2 venv of the S3A test and Spark 3.5 venv of the Iceberg test
#                                 (scripts/test.sh, hence CI)
#   scripts/install.sh --list [--test]   print what would be installed, install nothing
#
# Idempotent: rerunning skips what is already there (a --test install also serves a plain one).
#
# Python: $PYTHON, else python3 on PATH (e.g. pyenv's), else Debian's python3 (installed if missing).
# Debian's python needs its venv and headers packages; any other python must bring its own headers
# (Python.h), which pyfuse3 and lakemount's C extensions compile against.
set -euo pipefail
cd "$(dirname "$0")/.."

test=0 list=0
for arg in "$@"; do
  case "$arg" in
    --test) test=1 ;;
    --list) list=1 ;;
    *) echo "usage: scripts/install.sh [--test] [--list]" >&2; exit 2 ;;
  esac
done

APT_PACKAGES=(
  fuse3 libfuse3-dev pkg-config gcc           # the mount: pyfuse3 builds from source; our C extensions (setup.py)
  openjdk-17-jre-headless procps              # PySpark (import, gc, export jobs): a Java runtime; Spark's launcher runs ps
  ca-certificates                             # pip over HTTPS
)
TEST_APT_PACKAGES=(
  git rocksdb-tools postgresql                # the suite's references: git (merge differential), sst_dump, PostgreSQL
  rclone s3fs s3cmd awscli                    # S3 clients the gateway and benchmark tests drive
  hyperfine                                   # benchmarks/cli_startup_bench.py
  chromium                                    # the web UI's browser tests (tests/ui, playwright drives it by path)
  nodejs                                      # npm, for axe-core (package.json), which tests/ui inject into the page
  iproute2                                    # the cluster tests: hosts are network namespaces (ip netns, veth, bridge)
)

# The Iceberg Spark venv takes Apache HttpClient 5 from an npm package: npm, Debian's unless one is on PATH.
command -v npm >/dev/null 2>&1 || TEST_APT_PACKAGES+=(npm)

EXTRAS=""
if [ "$test" = 1 ]; then
  APT_PACKAGES+=("${TEST_APT_PACKAGES[@]}")
  EXTRAS="[test]"
fi
if [ "$list" = 1 ]; then
  echo "apt: ${APT_PACKAGES[*]}"
  echo "pip: -e .$EXTRAS"
  [ "$test" = 0 ] || echo "npm: axe-core (package.json, pinned by package-lock.json, into node_modules/)"
  [ "$test" = 0 ] || echo "spark-s3a: ${SPARK_S3A_VENV:-.venv-spark32} (pyspark 3.2.4, hadoop-aws jars)"
  [ "$test" = 0 ] || echo "spark-iceberg: ${SPARK_ICEBERG_VENV:-.venv-spark35} (pyspark 3.5.9, Iceberg Spark runtime jars)"
  exit 0
fi

say() { echo "install: $*" >&2; }
die() { say "$*"; exit 1; }

apt_install() { # packages... -> apt-get install those not installed yet
  local missing=() p
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || die "need root to apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  [ -z "${PYTHON:-}" ] || die "PYTHON=$PYTHON is not an executable on PATH"
  say "no python3 on PATH: installing Debian's"
  apt_install python3
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PY is $("$PY" -V 2>&1); lakemount needs Python >= 3.11"
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if dpkg -S "$(readlink -f "$(command -v "$PY")")" >/dev/null 2>&1; then
  # Debian's own python: ensurepip (for venv) and the headers are packages of their own.
  APT_PACKAGES+=("python$pyver-venv" "python$pyver-dev")
fi
apt_install "${APT_PACKAGES[@]}"
"$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || die "$PY has no headers (Python.h): pyfuse3 and lakemount's C extensions cannot build; use a python with headers or Debian's python3"
command -v java >/dev/null 2>&1 || die "no java on PATH after installing openjdk-17-jre-headless: PySpark cannot start"

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
built() { # both C extensions load and pyfuse3 binds to the shim (they are optional in setup.py: pip does not fail)
  .venv/bin/python -c '
import lakemount.graveler._sstblock
from lakemount.fuse import kflags
import pyfuse3
assert kflags.active(), "lakemount.fuse._kflags is missing or pyfuse3 does not bind to it"
' 2>&1
}
fresh() { # stamp -> 0 if the install it stands for is newer than what it installed from
  [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ] && [ ! setup.py -nt "$1" ] && [ -z "$(find lakemount -name '*.c' -newer "$1")" ]
}
# The editable install is a plain path entry (editable_mode=compat: a .pth naming this directory), not
# setuptools' default import hook, whose finder module every Python start of the venv imports (pathlib,
# importlib.util...: ~10 ms of each `lakemount` verb, issue 41). An install made with the hook is redone,
# unless the hook is all this setuptools offers (it calls compat transitional): the stamp then says so.
hooked() {
  compgen -G '.venv/lib/python*/site-packages/__editable___lakemount_*_finder.py' >/dev/null \
    && ! grep -qx hook "$stamp" .venv/.lakemount-installed-test 2>/dev/null
}
# One stamp per flavour; the test one stands for the plain one too (its extras are a superset).
stamp=.venv/.lakemount-installed$([ "$test" = 1 ] && echo -test || true)
if { ! fresh "$stamp" && ! fresh .venv/.lakemount-installed-test; } || hooked || ! built >/dev/null; then
  .venv/bin/pip install -q --upgrade pip
  if .venv/bin/pip install -q -e ".$EXTRAS" --config-settings editable_mode=compat; then
    echo path > "$stamp"
  else
    say "setuptools refused editable_mode=compat: installing with its import hook (each start pays for its finder)"
    .venv/bin/pip install -q -e ".$EXTRAS"
    echo hook > "$stamp"
  fi
fi
if ! err=$(built); then
  rm -f .venv/.lakemount-installed .venv/.lakemount-installed-test
  die "C extensions or pyfuse3 did not build (${err##*$'\n'}); see the compiler's error with: .venv/bin/pip install -v -e ."
fi

# The systemd units run `lakemount` from PATH.
if [ "$(id -u)" -eq 0 ] && [ ! -e /usr/local/bin/lakemount ]; then
  ln -sfn "$(pwd)/.venv/bin/lakemount" /usr/local/bin/lakemount
fi

# The browser tests' accessibility checker (axe-core, pinned in package-lock.json): a file tests/ui inject into
# the page, never run by the server (no runtime Node); npm is in the test packages above.
if [ "$test" = 1 ]; then
  if [ ! -f node_modules/axe-core/axe.min.js ] || [ package-lock.json -nt node_modules/axe-core/axe.min.js ]; then
    npm ci --no-audit --no-fund --loglevel=error >/dev/null
    touch node_modules/axe-core/axe.min.js
  fi
fi

# The separate venvs for the Spark S3A end-to-end test (pyspark 3.2.4 + hadoop-aws jars) and the
# Iceberg Spark test (pyspark 3.5.9 + Iceberg's runtime, ~2 minutes the first time): tests only.
if [ "$test" = 1 ]; then
  PYTHON="$PY" scripts/install_spark_s3a.sh
  PYTHON="$PY" scripts/install_spark_iceberg.sh
fi
