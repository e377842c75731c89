#!/usr/bin/env bash
# Load test (a measurement, not a CI step): a database of 1,000 commits × 200 benchmarks ×
# 5 metrics (1,000,000 measurements) served by `kymo serve --release`, hit by wrk at 64
# connections on the home, repository, benchmark, compare and API pages, while uploads of
# 1,000 measurements each go on one after another. Prints, per page and for the mix: requests/s,
# p50 and p99 latency, errors; each page again with a cookie, as a logged-in reader, which the
# response cache does not serve; the uploads' status codes and latency; how the response cache
# served; the server's peak RSS.
#
# Needs wrk (Debian: apt-get install wrk) and curl. Environment knobs:
#   DURATION=60 (mixed run, seconds)  PAGE_SECONDS=10 (each page alone)  CONNECTIONS=64
#   THREADS=2  LOAD_DIR=~/.cache/kymo-load (the generated database is kept there and reused)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/load-common.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}"
export SQLX_OFFLINE=true
duration="${DURATION:-60}"
page_seconds="${PAGE_SECONDS:-10}"
connections="${CONNECTIONS:-64}"
threads="${THREADS:-2}"
work="${LOAD_DIR:-$HOME/.cache/kymo-load}"
mkdir -p "$work"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

cargo build --release -p kymo-server --bin kymo --example load_db >&2
bin="$CARGO_TARGET_DIR/release"
db="$work/load.db"
if [ ! -f "$db" ]; then
  echo "generating $db (1,000,000 measurements)..." >&2
  "$bin/examples/load_db" "$db" | tee "$work/generate.txt" >&2
fi
# Serve a copy, so that the uploads of one run do not change the next run's database.
cp "$db" "$work/serve.db"
rm -f "$work/serve.db-wal" "$work/serve.db-shm"

"$bin/kymo" serve --no-worker --listen 127.0.0.1:0 --db "$work/serve.db" --data "$work/data" \
  >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill $server 2>/dev/null; kill $rss_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q http "$work/serve.out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$work/serve.out")

# Peak resident memory of the server, sampled every half second.
: >"$work/rss.txt"
(while kill -0 $server 2>/dev/null; do
  grep VmRSS /proc/$server/status | awk '{print $2}' >>"$work/rss.txt"
  sleep 0.5
done) &
rss_pid=$!

head=$(printf '%040x' 1000)
base=$(printf '%040x' 999)
machine=$(curl -s "$url/api/v1/machines" | grep -o '"fingerprint":"[0-9a-f]*"' | head -1 | cut -d'"' -f4)
load_pages "$head" "$base"

# wrk's summary as one table row: requests/s, p50, p99, errors.
summarise() {
  printf '| %s | %s |\n' "$1" "$(wrk_figures "$2")"
}

echo "| page | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|"
for page in "${pages[@]}"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url$page")
  [ "$code" = 200 ] || { echo "$page answers $code" >&2; exit 1; }
  wrk -t"$threads" -c"$connections" -d"${page_seconds}s" --latency "$url$page" >"$work/wrk-page.txt"
  summarise "\`$page\` alone, ${page_seconds} s" "$work/wrk-page.txt"
done

# The mix: every page in turn on every connection, with uploads alongside.
{
  echo "local paths = {"
  for page in "${pages[@]}"; do echo "  \"$page\","; done
  echo "}"
  echo 'local i = 0'
  echo 'request = function() i = i + 1; return wrk.format("GET", paths[(i % #paths) + 1]) end'
} >"$work/mix.lua"

# An upload of 200 benchmarks × 5 metrics (1,000 measurements) to a commit of the history.
upload_body() {
  local commit="$1"
  printf '{"commit":"%040x","machine":"%s","suites":[{"suite":"load","results":{"benchmarks":[' "$commit" "$machine"
  for b in $(seq 0 199); do
    [ "$b" -gt 0 ] && printf ','
    printf '{"name":"group_%d/bench_%d","metrics":[' $((b % 10)) "$b"
    for m in 0 1 2 3 4; do
      [ "$m" -gt 0 ] && printf ','
      printf '{"name":"metric_%d","unit":"ns","direction":"lower","value":%d,"samples":[%d,%d,%d]}' \
        "$m" $((1000 + b + m)) $((1000 + b + m)) $((1001 + b + m)) $((999 + b + m))
    done
    printf ']}'
  done
  printf ']}}]}'
}
upload_body 500 >"$work/upload.json"
: >"$work/uploads.txt"
(end=$((SECONDS + duration))
 while [ $SECONDS -lt $end ]; do
   curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -H 'content-type: application/json' \
     -H "authorization: Bearer $(cat "$work/serve.db.admin-token")" \
     --data-binary @"$work/upload.json" "$url/api/v1/repos/load/results" >>"$work/uploads.txt"
 done) &
uploads=$!
wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$work/mix.lua" "$url" >"$work/wrk-mix.txt"
wait $uploads
summarise "all pages in turn, ${duration} s, with uploads" "$work/wrk-mix.txt"

echo
n=$(wc -l <"$work/uploads.txt")
ok=$(grep -c '^201 ' "$work/uploads.txt" || true)
times=$(awk '{print $2}' "$work/uploads.txt" | sort -n)
p50=$(echo "$times" | awk -v n="$n" 'NR == int((n + 1) / 2) {print $1}')
p99=$(echo "$times" | awk -v n="$n" 'NR == int(n * 0.99 + 0.5) {print $1}')
echo "uploads during the mix: $n sent, $ok stored (201), p50 ${p50}s, p99 ${p99}s, $((n * 1000)) measurements offered"

echo
echo "| page, computed every time | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|"
# The same pages for logged-in readers, whose requests carry a cookie: the response cache
# steps aside, so every request is computed (the cost of a cache miss, at load). Last, because
# the requests wrk gives up on are still computed after it stops.
for page in "${pages[@]}"; do
  wrk -t"$threads" -c"$connections" -d"${page_seconds}s" --latency -H 'Cookie: reader=1' \
    "$url$page" >"$work/wrk-page.txt"
  summarise "\`$page\`, ${page_seconds} s" "$work/wrk-page.txt"
done
echo "response cache: $(curl -s "$url/metrics" | awk '/^kymo_response_cache_served_total/ {sub(/.*served="/, ""); sub(/"}/, ""); printf "%s ", $0}')"
peak=$(sort -n "$work/rss.txt" | tail -1)
echo "server RSS: peak $((peak / 1024)) MiB (VmHWM $(awk '/VmHWM/ {print int($2 / 1024)}' /proc/$server/status) MiB)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
