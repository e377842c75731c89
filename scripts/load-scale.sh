#!/usr/bin/env bash
# Scale measurement (not a CI step): a database of COMMITS commits × BENCHMARKS benchmarks ×
# 5 metrics made by `examples/load_db.rs` (10,000 × 200 × 5 = 10 million measurements by
# default; COMMITS=100000 for 100 million), then every page computed (each request carries an
# `Authorization` header, so the response cache steps aside) at 1, 16 and 64 readers at once.
# Prints the generation time, the database size and bytes per measurement, the ingest rate
# (over the fill and over its last commits), and per page and reader count: requests/s, p50,
# p99 and errors.
#
# Needs wrk (Debian: apt-get install wrk) and curl. Environment knobs:
#   COMMITS=10000  BENCHMARKS=200  PAGE_SECONDS=10  READERS="1 16 64"  BUILD=1
#   ANALYSE=1 (0: no change-point analysis after the fill; at 100,000 commits a series it takes
#   longer than the ingest)
#   STAGED_TAIL=199 (the last commits are stored without a merge, 199,000 staged rows at 200
#   benchmarks: the most a reader finds staged between two merges; the server is told not to
#   merge them while the pages are measured; the ingest rates are those of the commits before)
#   APPEND=0 (N: on a kept database, N more commits stored and their ingest rate printed)
#   SCALE_DIR=~/.cache/kymo-scale (the generated database is kept there and reused; it is large:
#   about 72 bytes a measurement, so 720 MB at 10 million, 7.2 GB at 100 million)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/load-common.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}"
export SQLX_OFFLINE=true
commits="${COMMITS:-10000}"
benchmarks="${BENCHMARKS:-200}"
page_seconds="${PAGE_SECONDS:-10}"
readers="${READERS:-1 16 64}"
work="${SCALE_DIR:-$HOME/.cache/kymo-scale}"
mkdir -p "$work"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

# BUILD=0 uses the binaries already built (a release build takes minutes on a busy machine).
[ "${BUILD:-1}" = 0 ] || cargo build --release -p kymo-server --bin kymo --example load_db >&2
bin="$CARGO_TARGET_DIR/release"
db="$work/scale-$commits-$benchmarks.db"
measurements=$((commits * benchmarks * 5))
if [ ! -f "$db" ]; then
  echo "generating $db ($measurements measurements; $(df -h --output=avail "$work" | tail -1) free)..." >&2
  started=$SECONDS
  analysis=()
  [ "${ANALYSE:-1}" = 1 ] || analysis=(--no-analysis)
  "$bin/examples/load_db" "$db" "$commits" "$benchmarks" "${analysis[@]}" \
    --staged-tail="${STAGED_TAIL:-199}" | tee "$work/generate-$commits.txt" >&2
  echo "generation: $((SECONDS - started)) s in all (ingest, then the analysis of every series)" \
    | tee -a "$work/generate-$commits.txt" >&2
fi
cat "$work/generate-$commits.txt"
# APPEND=N: ingest into the kept database measured again, N more commits through the build at
# hand (the fill's figures above are those of the build that made it); the last STAGED_TAIL of
# them are left staged, as the pages below expect, and the rate is that of the others.
if [ "${APPEND:-0}" -gt 0 ]; then
  "$bin/examples/load_db" "$db" "$benchmarks" --append="$APPEND" --staged-tail="${STAGED_TAIL:-199}" \
    | tee -a "$work/append.txt"
fi
bytes=$(stat -c %s "$db")
echo "database: $((bytes / 1024 / 1024)) MiB, $((bytes / measurements)) bytes a measurement (everything: rows, indexes, commits, runs)"
if command -v sqlite3 >/dev/null; then
  echo "bytes a measurement by table and index (dbstat):"
  sqlite3 "$db" "SELECT name, round(sum(pgsize) * 1.0 / $measurements, 1) FROM dbstat
                 GROUP BY name ORDER BY sum(pgsize) DESC LIMIT 4"
fi

# Served as it is: the pages only read, so the database is not copied (at 100 million a copy
# would not fit beside it).
# The staged rows stay staged while the pages are measured (an environment variable, not a
# flag, so that the script serves a database with the binary of a build before staging too).
KYMO_MERGE_IDLE_SECONDS=0 "$bin/kymo" serve --no-worker --listen 127.0.0.1:0 --db "$db" --data "$work/data" \
  >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q http "$work/serve.out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/serve.out")
token=$(cat "$db.admin-token")

# load_db names commit i (from 0) by the sha of i + 1: the head is the last.
head=$(printf '%040x' "$commits")
base=$(printf '%040x' $((commits - 1)))
load_pages "$head" "$base"
# The benchmark page zoomed out to the whole history: drawn from the series' summaries.
pages+=("/repos/load/benchmarks/group_0/bench_0?last=$commits")

echo
echo "| page, computed | readers | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|---|"
for page in "${pages[@]}"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "authorization: Bearer $token" "$url$page")
  [ "$code" = 200 ] || { echo "$page answers $code" >&2; exit 1; }
  for n in $readers; do
    threads=$((n < 2 ? 1 : 2))
    wrk -t"$threads" -c"$n" -d"${page_seconds}s" --timeout 30s --latency \
      -H "authorization: Bearer $token" "$url$page" >"$work/wrk.txt"
    printf '| `%s` | %s | %s |\n' "$page" "$n" "$(wrk_figures "$work/wrk.txt")"
  done
done
echo "server VmHWM $(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$server/status) MiB; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
