#!/usr/bin/env bash
# Install the separate Spark venv used by the Iceberg Spark test (tests/iceberg/test_spark.py) and
# docs/ICEBERG.md's Spark example: pyspark 3.5.9 with Iceberg's Spark runtime, no Maven.
#
#   .venv-spark35/            python + pyspark==3.5.9 (git-ignored)
#   .venv-spark35/jars/       iceberg-spark-runtime-3.5_2.12-1.10.2.jar and the two jars it lacks
#
# The runtime jar ships in the PyPI wheel snowpark-connect-deps-iceberg, with two of the libraries
# it relocates into org.apache.iceberg.shaded removed: Jackson (the REST catalog's JSON) and Apache
# HttpClient 5 (its HTTP). scripts/relocate_jar.py puts them back from jars that carry them:
#   - jackson-core/-databind/-annotations 2.18.8 from the PyPI wheel snowpark-connect-deps-2;
#   - HttpClient 5.5 (Iceberg 1.10 needs >= 5.4; Debian 12 has 5.2) from the standalone WireMock
#     jar in the npm package wiremock, where it is relocated to wiremock.org.apache.hc.
#
# Idempotent, and silent when there is nothing to do. Set SPARK_ICEBERG_VENV to use another path.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${SPARK_ICEBERG_VENV:-.venv-spark35}
PY=${PYTHON:-python3}
PYSPARK_VERSION=3.5.9
ICEBERG_WHEEL=snowpark-connect-deps-iceberg==1.0.3
JACKSON_WHEEL=snowpark-connect-deps-2==3.56.7
WIREMOCK=wiremock@3.13.2
RUNTIME=iceberg-spark-runtime-3.5_2.12-1.10.2.jar
JACKSON=iceberg-shaded-jackson-2.18.8.jar
HTTPCLIENT=iceberg-shaded-httpclient5.jar
# sha256 of the jars as they ship in those packages
declare -A SHA=(
  [$RUNTIME]=5b30080c7bbbced0fb0900894b7ea0200b1bbb2e4c355ebe727baafaf49c16f6
  [jackson-core-2.18.8.jar]=ab865e39f01403598748b090a3bf528616e701913a71afc37a227daa0fabb4ae
  [jackson-databind-2.18.8.jar]=06ea5950905263fac3e1730de6a21a023151626af6bb3cb099f88644a0fa04f0
  [jackson-annotations-2.18.8.jar]=b21889d334ff04b8a3efe54473613ec79e7eed080a28e98abbc3997b46901a54
  [wiremock-standalone-3.13.2.jar]=d097b19bd483c5038479b13a5c71e9faf8f2f5106584f0c120a7770ab0bdb367
)

say() { echo "install_spark_iceberg: $*" >&2; }
. scripts/spark_venv.sh  # quiet, pyspark_venv
checked() { # file name-in-SHA -> the file, or exit if its checksum is not the pinned one
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "${SHA[$2]}" ] || { say "checksum mismatch for $2: got $got, want ${SHA[$2]}"; exit 1; }
}

command -v npm >/dev/null 2>&1 || { say "needs npm (Debian: apt-get install npm) to fetch $WIREMOCK"; exit 1; }
pyspark_venv "$VENV" "$PY" "$PYSPARK_VERSION" "a ~320 MB sdist"

# A stamp newer than the jars and than the relocation tool stands for all of them.
stamp="$VENV/jars/.complete"
if [ -f "$stamp" ] && [ ! scripts/relocate_jar.py -nt "$stamp" ] \
   && [ -f "$VENV/jars/$RUNTIME" ] && [ -f "$VENV/jars/$JACKSON" ] && [ -f "$VENV/jars/$HTTPCLIENT" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$VENV/jars"
rm -f "$stamp"

say "fetching $ICEBERG_WHEEL and $JACKSON_WHEEL (PyPI, ~130 MB) and $WIREMOCK (npm, ~18 MB)"
quiet "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps "$ICEBERG_WHEEL" "$JACKSON_WHEEL" -d "$tmp"
(cd "$tmp" && quiet npm pack --silent "$WIREMOCK")
for whl in "$tmp"/*.whl; do
  "$VENV/bin/python" -m zipfile -e "$whl" "$tmp/x"
done
tar xzf "$tmp"/wiremock-*.tgz -C "$tmp/x"

runtime=$(find "$tmp/x" -name "$RUNTIME" | head -n1)
[ -n "$runtime" ] || { say "$RUNTIME is not in $ICEBERG_WHEEL"; exit 1; }
checked "$runtime" "$RUNTIME"
jackson=()
for j in jackson-core-2.18.8.jar jackson-databind-2.18.8.jar jackson-annotations-2.18.8.jar; do
  f=$(find "$tmp/x" -name "$j" | head -n1)
  [ -n "$f" ] || { say "$j is not in $JACKSON_WHEEL"; exit 1; }
  checked "$f" "$j"
  jackson+=("$f")
done
wiremock=$(find "$tmp/x" -name wiremock-standalone-3.13.2.jar | head -n1)
[ -n "$wiremock" ] || { say "wiremock-standalone-3.13.2.jar is not in $WIREMOCK"; exit 1; }
checked "$wiremock" wiremock-standalone-3.13.2.jar

quiet "$VENV/bin/python" scripts/relocate_jar.py "$VENV/jars/$JACKSON" "${jackson[@]}" \
  --move com.fasterxml.jackson=org.apache.iceberg.shaded.com.fasterxml.jackson
# HttpClient's only other dependency is SLF4J, which Spark brings under its own name.
quiet "$VENV/bin/python" scripts/relocate_jar.py "$VENV/jars/$HTTPCLIENT" "$wiremock" --only wiremock.org.apache.hc \
  --move wiremock.org.apache.hc=org.apache.iceberg.shaded.org.apache.hc --move wiremock.org.slf4j=org.slf4j
mv -f "$runtime" "$VENV/jars/$RUNTIME"
touch "$stamp"
