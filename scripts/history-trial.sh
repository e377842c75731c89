#!/usr/bin/env bash
# Measures a whole history as a new user would, optionally beside CPU hogs: starts `kymo serve`
# in a fresh directory, adds the repository with a suites file kept on the server and the
# backfill of its last COMMITS commits, waits for the queue to empty, and prints the jobs, the
# instruction counts per benchmark and commit, and the open regressions (changes filed).
#
#   scripts/history-trial.sh KYMO NAME HISTORY SUITES COMMITS [DIR]
#   HOGS=1 scripts/history-trial.sh target/release/kymo bs58 /tmp/bs58-history bench.toml 8
#
# HOGS (default 0) CPU-bound processes run for the whole trial. The server listens on PORT
# (default 18393) and keeps its database in DIR (default: a new temporary directory).
set -euo pipefail

kymo="$(realpath "$1")" name="$2" history="$(realpath "$3")" suites="$(realpath "$4")"
commits="$5"
dir="${6:-$(mktemp -d)}"
port="${PORT:-18393}"
mkdir -p "$dir"
cd "$dir"
export KYMO_SERVER="http://127.0.0.1:$port"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for _ in $(seq 1 "${HOGS:-0}"); do
  sh -c 'while :; do :; done' &
  pids+=("$!")
done
"$kymo" serve --listen "127.0.0.1:$port" >serve.log 2>&1 &
pids+=("$!")
for _ in $(seq 1 50); do "$kymo" health >/dev/null 2>&1 && break; sleep 0.2; done
echo "load average at repo add: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
"$kymo" repo add "$name" "$history" --suites "$suites" --backfill "$commits"
# grep reads the whole listing: with -q it would stop early, and pipefail would end the wait.
while "$kymo" jobs | grep -E ' (queued|running) ' >/dev/null; do sleep 10; done
echo "queue empty after $(($(date +%s) - start)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$kymo" jobs | head -n "$((commits * 3 + 1))"
echo "instructions per benchmark, oldest commit first:"
curl -sf "$KYMO_SERVER/api/v1/repos/$name/series?metric=instructions&limit=$commits" |
  python3 -c '
import json, sys
for s in json.load(sys.stdin):
    print("  %s: %s" % (s["benchmark"], " ".join(str(int(p["value"])) for p in s["points"])))'
echo "changes filed (open regressions and improvements):"
curl -sf "$KYMO_SERVER/api/v1/repos/$name/regressions" |
  python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print("  %s (%s) %s %s %+.2f %% %s" % (r["sha"][:10], r["message"].splitlines()[0],
          r["benchmark"], r["metric"], r["change_pct"], r["kind"]))'
echo "database: $dir/kymo.db"
