#!/usr/bin/env bash
# Run ceph/s3-tests (a public S3 conformance suite) against a lakemount gateway in flat-bucket mode.
# Downloads nothing: give it a checkout of ceph/s3-tests and a venv holding its requirements.txt.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: scripts/s3tests.sh [options] S3TESTS_DIR S3TESTS_VENV [-- PYTEST_ARGS...]

Starts `lakemount serve --flat --no-api` in a throwaway LAKEMOUNT_HOME, creates the three
users s3-tests needs (main with the Admin policy; alt and tenant with no policy, so they are
denied on main's buckets), writes an s3tests.conf with their generated keys and the port, runs

    pytest s3tests/functional/test_s3.py s3tests/functional/test_headers.py -m M -k K

from S3TESTS_DIR with S3TESTS_VENV's python (M and K are the deselections of what lies outside
the gateway's subset: ACLs, versioning, lifecycle, encryption, policies, tagging...), then stops
the gateway and removes the home (kept with --keep). Exits with pytest's status.

  S3TESTS_DIR    a checkout of https://github.com/ceph/s3-tests (kept outside this project)
  S3TESTS_VENV   a venv with its requirements (python -m venv V; V/bin/pip install -r requirements.txt)

Options:
  --lakemount DIR   the lakemount source tree to serve (default: this script's checkout)
  --python PY       python with lakemount's dependencies (default: DIR/.venv/bin/python)
  --port N          gateway port (default: a free one)
  --workers N       gateway worker processes (default: 2)
  --selection DIR   directory holding M.txt and K.txt (default: DIR/scripts/s3tests)
  --tls             serve HTTPS with a self-signed certificate made by openssl in the home, and set
                    is_secure = True (boto3 sends aws-chunked bodies with trailing checksums only over HTTPS)
  --keep            keep the home (gateway log, conf) and print where it is
  -h, --help        this text
PYTEST_ARGS after `--` go to pytest (e.g. -q -rf, --junitxml=FILE, -x).
EOF
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$here"; py=""; port=""; workers=2; selection=""; keep=0; tls=0
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --lakemount) src="$(cd "$2" && pwd)"; shift 2 ;;
        --python) py="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --selection) selection="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        --tls) tls=1; shift ;;
        --) break ;;
        -*) echo "s3tests.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then usage >&2; exit 2; fi
s3dir="$(cd "$1" && pwd)"; s3venv="$(cd "$2" && pwd)"; shift 2
if [ "${1:-}" = "--" ]; then shift; fi
py="${py:-$src/.venv/bin/python}"
selection="$(cd "${selection:-$here/scripts/s3tests}" && pwd)"
for f in "$s3dir/s3tests/functional/test_s3.py" "$s3venv/bin/python" "$py" "$selection/M.txt" "$selection/K.txt"; do
    [ -e "$f" ] || { echo "s3tests.sh: missing $f" >&2; exit 2; }
done
if [ -z "$port" ]; then
    port="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
fi

home="$(mktemp -d "${TMPDIR:-/tmp}/lm-s3tests.XXXXXX")"
gw_pid=""
cleanup() {
    if [ -n "$gw_pid" ] && kill -0 "$gw_pid" 2>/dev/null; then
        kill -INT "$gw_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$gw_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$gw_pid" 2>/dev/null || true
        wait "$gw_pid" 2>/dev/null || true
    fi
    if [ "$keep" = 1 ]; then echo "s3tests.sh: home kept: $home" >&2; else rm -rf "$home"; fi
}
trap cleanup EXIT

export LAKEMOUNT_HOME="$home" PYTHONPATH="$src${PYTHONPATH:+:$PYTHONPATH}"
cli='import sys; from lakemount.cli.main import main; sys.argv[0] = "lakemount"; sys.exit(main())'
lm() { "$py" -c "$cli" "$@"; }
key() {  # user -> "access_key_id secret_access_key"
    lm auth users create --id "$1" --json >/dev/null
    lm auth users credentials create --id "$1" --json |
        "$py" -c 'import json, sys; d = json.load(sys.stdin); print(d["access_key_id"], d["secret_access_key"])'
}
read -r main_ak main_sk < <(key main)
lm auth users policies attach --id main --policy Admin --json >/dev/null
read -r alt_ak alt_sk < <(key alt)
read -r ten_ak ten_sk < <(key tenant)

secure=False; tls_args=()
if [ "$tls" = 1 ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$home/key.pem" -out "$home/cert.pem" 2>/dev/null
    secure=True; tls_args=(--tls-cert "$home/cert.pem" --tls-key "$home/key.pem")
fi

conf="$home/s3tests.conf"
cat >"$conf" <<EOF
[DEFAULT]
host = 127.0.0.1
port = $port
is_secure = $secure
ssl_verify = False
[fixtures]
bucket prefix = gwtest-{random}-
[s3 main]
display_name = main
user_id = main
email = main@example.com
access_key = $main_ak
secret_key = $main_sk
[s3 alt]
display_name = alt
user_id = alt
email = alt@example.com
access_key = $alt_ak
secret_key = $alt_sk
[s3 tenant]
display_name = tenant
user_id = tenant
email = tenant@example.com
access_key = $ten_ak
secret_key = $ten_sk
tenant = t1
[iam]
email = iam@example.com
user_id = iam
access_key = IAMACCESSKEY00000000
secret_key = iamsecretkey00000000000000000000000000000
display_name = iam
[iam root]
access_key = IAMROOTACCESSKEY0000
secret_key = iamrootsecret000000000000000000000000000
user_id = iamroot
email = iamroot@example.com
[iam alt root]
access_key = IAMALTROOTACCESSKEY0
secret_key = iamaltrootsecret000000000000000000000000
user_id = iamaltroot
email = iamaltroot@example.com
EOF

"$py" -c "$cli" serve --flat --no-api --listen "127.0.0.1:$port" --workers "$workers" "${tls_args[@]}" >"$home/gateway.log" 2>&1 &
gw_pid=$!
for _ in $(seq 150); do
    if "$py" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)' "$port" 2>/dev/null; then
        break
    fi
    kill -0 "$gw_pid" 2>/dev/null || { echo "s3tests.sh: the gateway exited:" >&2; cat "$home/gateway.log" >&2; exit 1; }
    sleep 0.2
done
echo "s3tests.sh: gateway of $src on 127.0.0.1:$port, is_secure = $secure (home $home)" >&2

rc=0
(cd "$s3dir" && unset LAKEMOUNT_HOME PYTHONPATH && S3TEST_CONF="$conf" "$s3venv/bin/python" -m pytest -p no:cacheprovider \
    s3tests/functional/test_s3.py s3tests/functional/test_headers.py \
    -m "$(cat "$selection/M.txt")" -k "$(cat "$selection/K.txt")" "$@") || rc=$?
exit "$rc"
