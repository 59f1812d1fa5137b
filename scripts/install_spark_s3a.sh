#!/usr/bin/env bash
# Install the separate Spark venv used by the Spark S3A end-to-end test (tests/spark_s3a/).
#
# Real S3A needs hadoop-aws and the AWS SDK bundle matching Spark's Hadoop; with only PyPI
# reachable (no Maven), the one combination that works here is pyspark 3.2.4 (Hadoop 3.3.1
# client jars) plus hadoop-aws-3.3.1.jar and aws-java-sdk-bundle-1.11.901.jar, which ship in
# the sagemaker-pyspark 1.4.5 sdist on PyPI. pyspark 3.2.4 cannot live in the project's
# .venv (which has pyspark>=3.5), hence a venv of its own:
#
#   .venv-spark32/            python + pyspark==3.2.4 (git-ignored)
#   .venv-spark32/jars/       hadoop-aws-3.3.1.jar, aws-java-sdk-bundle-1.11.901.jar
#
# Idempotent, and silent when there is nothing to do. Set SPARK_S3A_VENV to use another path.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${SPARK_S3A_VENV:-.venv-spark32}
PY=${PYTHON:-python3}
PYSPARK_VERSION=3.2.4
SAGEMAKER_PYSPARK_VERSION=1.4.5
# sha256 of the two jars as they ship in sagemaker_pyspark-1.4.5.tar.gz
declare -A JARS=(
  [hadoop-aws-3.3.1.jar]=6be50ad8a8b445d2802381b085b2a3ede5c29d353450a6a21f16b2fefa962b6e
  [aws-java-sdk-bundle-1.11.901.jar]=b87175b32a16544cc1b37cf40390eb375833e62bed67f8ce6cde4b7ad6429ead
)

say() { echo "install_spark_s3a: $*" >&2; }
. scripts/spark_venv.sh  # quiet, pyspark_venv
pip_quiet() { quiet "$VENV/bin/pip" "$@" -q --disable-pip-version-check; }

pyspark_venv "$VENV" "$PY" "$PYSPARK_VERSION" "builds from a ~280 MB sdist; a few minutes"

jar_ok() { # name -> 0 if present with the expected checksum
  [ -f "$VENV/jars/$1" ] && [ "$(sha256sum "$VENV/jars/$1" | cut -d' ' -f1)" = "${JARS[$1]}" ]
}
# Checksums are verified once, when the jars are installed; afterwards a stamp that is newer
# than both jars stands for the check (hashing 190 MB on every run would be slow).
stamp="$VENV/jars/.verified"
need=0
for j in "${!JARS[@]}"; do
  if [ ! -f "$VENV/jars/$j" ] || [ ! -f "$stamp" ] || [ "$VENV/jars/$j" -nt "$stamp" ]; then need=1; fi
done
if [ "$need" = 1 ]; then
  missing=()
  for j in "${!JARS[@]}"; do jar_ok "$j" || missing+=("$j"); done
  if [ ${#missing[@]} -gt 0 ]; then
    say "fetching ${missing[*]} from the sagemaker-pyspark==$SAGEMAKER_PYSPARK_VERSION sdist on PyPI (~180 MB)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    pip_quiet download --no-deps --no-binary :all: "sagemaker-pyspark==$SAGEMAKER_PYSPARK_VERSION" -d "$tmp"
    sdist=$(ls "$tmp"/sagemaker_pyspark-*.tar.gz)
    mkdir -p "$VENV/jars"
    for j in "${missing[@]}"; do
      member=$(tar tzf "$sdist" | grep -E "/deps/jars/$j\$" | head -n1)
      [ -n "$member" ] || { say "$j is not in $(basename "$sdist")"; exit 1; }
      tar xzf "$sdist" -C "$tmp" "$member"
      got=$(sha256sum "$tmp/$member" | cut -d' ' -f1)
      if [ "$got" != "${JARS[$j]}" ]; then
        say "checksum mismatch for $j: got $got, want ${JARS[$j]}"
        exit 1
      fi
      mv -f "$tmp/$member" "$VENV/jars/$j.part"
      mv -f "$VENV/jars/$j.part" "$VENV/jars/$j"
    done
  fi
  touch "$stamp"
fi
