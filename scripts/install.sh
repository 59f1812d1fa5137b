#!/usr/bin/env bash
# Install everything lakemount needs on a fresh Debian 12 machine: Debian packages
# (as root, via apt-get) and Python packages (via pip, into the project's .venv).
# Idempotent: rerunning skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(fuse3 libfuse3-dev pkg-config rocksdb-tools postgresql git python3-venv rclone s3fs s3cmd awscli hyperfine)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install: need root to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.lakemount-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[test]"
  touch "$stamp"
fi

# The systemd units run `lakemount` from PATH.
if [ "$(id -u)" -eq 0 ] && [ ! -e /usr/local/bin/lakemount ]; then
  ln -s "$(pwd)/.venv/bin/lakemount" /usr/local/bin/lakemount
fi

# The separate venv for the Spark S3A end-to-end test (pyspark 3.2.4 + hadoop-aws jars).
scripts/install_spark_s3a.sh
