#!/usr/bin/env bash
# Run pjdfstest (https://github.com/pjd/pjdfstest) against a fresh lakemount mount, as root.
#
#   scripts/pjdfstest.sh PJDFSTEST_DIR [TEST ...]
#
# PJDFSTEST_DIR  a checkout of pjdfstest with its `pjdfstest` binary built (never part of this repository)
# TEST           paths under its tests/ (e.g. link rename/00.t unlink/00.t); none: the whole suite
#
# The mount runs from this tree under a throwaway LAKEMOUNT_HOME with one repository, `pjd`; pjdfstest
# also acts as uids 65532-65534, which are mapped (mount.users) to a lakemount user with the Developer
# policy, since a shared mount refuses unmapped uids.  Prints prove's summary; the mount is always unmounted.
# Exits with prove's status.
set -uo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
suite=$(cd "$1" && pwd) || exit 2
shift
[ -x "$suite/pjdfstest" ] || { echo "no built pjdfstest binary in $suite" >&2; exit 2; }
tree=$(cd "$(dirname "$0")/.." && pwd)
py="$tree/.venv/bin/python"
base=$(mktemp -d /tmp/lakemount-pjdfstest.XXXXXX)
mkdir -m 700 "$base/home" && mkdir "$base/mnt"
export LAKEMOUNT_HOME="$base/home" PYTHONPATH="$tree"
unset LAKEMOUNT_CONFIG
lm() { "$py" -m lakemount.cli.main "$@"; }
lm repo create lakefs://pjd >/dev/null || exit 1
lm auth users create --id pjd-nobody >/dev/null || exit 1
lm auth users policies attach --id pjd-nobody --policy Developer >/dev/null || exit 1
export LAKEMOUNT_MOUNT_USERS=65532=pjd-nobody,65533=pjd-nobody,65534=pjd-nobody
lm mount "$base/mnt" >"$base/mount.log" 2>&1 || { cat "$base/mount.log"; exit 1; }
trap 'cd /; fusermount3 -u "$base/mnt" 2>/dev/null || umount -l "$base/mnt"' EXIT
mkdir "$base/mnt/pjd/main/work" && cd "$base/mnt/pjd/main/work" || exit 1
tests=()
for t in "${@:-}"; do tests+=("$suite/tests/$t"); done
prove -r "${tests[@]}" >"$base/prove.log" 2>&1
status=$?
sed -n '/^\(Test Summary Report\|All tests successful\)/,$p' "$base/prove.log"
echo "full log: $base/prove.log"
exit $status
