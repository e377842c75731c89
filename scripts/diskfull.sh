#!/usr/bin/env bash
# Manual check (needs root to mount): kymo serve on a 2 MiB tmpfs, uploads until the disk is
# full, then the database is checked and the server restarted with room. Prints what it saw.
# The automated test (server/tests/it/disk_full.rs) does the same with RLIMIT_FSIZE.
# Usage: scripts/diskfull.sh [path/to/kymo]
set -euo pipefail
cd "$(dirname "$0")/.."
kymo="${1:-${CARGO_TARGET_DIR:-target}/debug/kymo}"
work=$(mktemp -d)
mnt="$work/disk"
mkdir -p "$mnt"
mount -t tmpfs -o size=2m tmpfs "$mnt"
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  umount "$mnt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

git init -q -b main "$work/repo"
git -C "$work/repo" -c user.name=k -c user.email=k@example.com commit -q --allow-empty -m first
sha=$(git -C "$work/repo" rev-parse HEAD)

start() {
  "$kymo" serve --no-worker --listen 127.0.0.1:0 --db "$mnt/kymo.db" --data "$work/data" >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 100); do grep -q http "$work/out" && break; sleep 0.1; done
  url=$(grep -o 'http://[^ ]*' "$work/out")
}
start
KYMO_SERVER="$url" "$kymo" repo add r "$work/repo" >/dev/null

# One upload of 1,000 benchmarks with 20 samples each.
{
  printf '{"benchmarks":['
  for b in $(seq 1000); do
    [ "$b" -gt 1 ] && printf ','
    printf '{"name":"bench/%d","metrics":[{"name":"time","unit":"ns","direction":"lower","samples":[' "$b"
    seq -s, "$b" "$((b + 19))" | tr -d '\n'
    printf ']}]}'
  done
  printf ']}'
} >"$work/results.json"

stored=0
while true; do
  if out=$(KYMO_SERVER="$url" "$kymo" upload --repo r --commit "$sha" --format kymo "$work/results.json" 2>&1); then
    stored=$((stored + 1))
  else
    echo "upload $((stored + 1)) refused: $out"
    break
  fi
  [ "$stored" -lt 100 ] || { echo "the disk never filled"; exit 1; }
done
echo "uploads stored before the disk filled: $stored"
echo "healthz while full: $(curl -s "$url/healthz")"
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
df -h "$mnt" | tail -1
echo "integrity: $(sqlite3 "$mnt/kymo.db" 'PRAGMA integrity_check')"
echo "runs, measurements: $(sqlite3 "$mnt/kymo.db" 'SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM measurements)')"
