#!/usr/bin/env bash
# kill -9 fault campaign against the real objdirect-server: random PUT / multipart / DeleteObjects /
# CopyObject traffic from a boto3 worker process, SIGKILL of the server at a random moment, restart,
# and a check of every key (old or new version exactly, checksums match) and of the data dir
# (nothing under tmp/, no blob file that the metadata does not reference). See docs/RELIABILITY.md.
#
# Usage: scripts/fault-campaign.sh [--quick] [--cycles N] [--seed S] [--bin-dir DIR] [--keep]
#                                 [--versioned]
#   The backend is the one OBJDIRECT_SERVER_ARGS names (scripts/with-ceph.sh sets it for RADOS;
#   default: the local backend). On RADOS the leak check runs once at the end (docs/RELIABILITY.md).
#   --versioned: the bucket has versioning Enabled, noncurrent versions are deleted by id too, and
#   every version of every key is checked after each restart (docs/versioning.md).
#   full mode: 100 cycles; --quick: 25 cycles (under 5 minutes here).
#   --bin-dir defaults to build/bin of this checkout. --keep keeps the work dir.
# Last line: cycles=N lost=N partial=N leaked=N. Exit status 1 if any of them is non-zero.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
CYCLES=100 BIN="$REPO/build/bin" KEEP=0 EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) CYCLES=25 ;;
    --cycles) CYCLES=$2; shift ;;
    --seed) EXTRA+=(--seed "$2"); shift ;;
    --bin-dir) BIN=$2; shift ;;
    --keep) KEEP=1 ;;
    --versioned) EXTRA+=(--versioned) ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "fault-campaign.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$BIN/objdirect-server" ] || { echo "fault-campaign.sh: $BIN/objdirect-server not built" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/objdirect-faults.XXXXXX")
# the work dir (data dir, server log, worker errors) is kept when the campaign fails or with --keep
cleanup() { if [ "$KEEP" != 1 ] && [ "${RC:-1}" = 0 ]; then rm -rf "$W"; fi; }
trap cleanup EXIT
RC=0
env -u AWS_CA_BUNDLE -u AWS_PROFILE PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 "$REPO/scripts/fault_campaign.py" --cycles "$CYCLES" --bin-dir "$BIN" --work "$W" "${EXTRA[@]}" || RC=$?
exit $RC
