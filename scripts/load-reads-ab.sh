#!/usr/bin/env bash
# Reads that follow one series (the benchmark page and the series API, computed), measured on
# two builds in turn: A B A B ... on databases that `load-scale.sh` generated (not a CI step).
#   scripts/load-reads-ab.sh KYMO_A DB_A KYMO_B DB_B [ROUNDS=2]
# Each server is started on its database alone, measured at READERS readers for PAGE_SECONDS,
# and stopped; staged rows stay staged (KYMO_MERGE_IDLE_SECONDS=0). Commits as load_db names
# them: COMMITS (10,000 by default) sets the head.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/load-common.sh
page_seconds="${PAGE_SECONDS:-10}"
readers="${READERS:-1 16}"
head=$(printf '%040x' "${COMMITS:-10000}")
pages=(
  "/repos/load/benchmarks/group_0/bench_0"
  "/api/v1/repos/load/series?benchmark=group_0/bench_0&metric=metric_0"
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| round | build | page, computed | readers | requests/s | p50 | p99 | errors | load average |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq "${5:-2}"); do
  for build in A B; do
    if [ $build = A ]; then kymo=$1 db=$2; else kymo=$3 db=$4; fi
    KYMO_MERGE_IDLE_SECONDS=0 "$kymo" serve --no-worker --listen 127.0.0.1:0 --db "$db" \
      --data "$work/data" >"$work/serve.out" 2>"$work/serve.err" &
    server=$!
    for _ in $(seq 600); do grep -q http "$work/serve.out" && break; sleep 0.1; done
    url=$(grep -o 'http://[^ ]*' "$work/serve.out")
    token=$(cat "$db.admin-token")
    for page in "${pages[@]}"; do
      for n in $readers; do
        wrk -t"$((n < 2 ? 1 : 2))" -c"$n" -d"${page_seconds}s" --timeout 30s --latency \
          -H "authorization: Bearer $token" "$url$page" >"$work/wrk.txt"
        printf '| %s | %s | `%s` | %s | %s | %s |\n' "$round" "$build" "$page" "$n" \
          "$(wrk_figures "$work/wrk.txt")" "$(cut -d' ' -f1 /proc/loadavg)"
      done
    done
    kill "$server"; wait "$server" 2>/dev/null || true
  done
done
