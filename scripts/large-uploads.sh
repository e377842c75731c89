#!/usr/bin/env bash
# Four concurrent uploads of about 63 MB each (14,000 benchmarks × 495 samples) against a
# fresh `kymo serve`; prints each upload's status and time and the server's peak RSS (VmHWM).
#
#   scripts/large-uploads.sh [KYMO_BINARY]      # default: target/release/kymo
set -euo pipefail
kymo="$(realpath "${1:-target/release/kymo}")"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
git init -q -b main repo
git -C repo -c user.name=k -c user.email=k@k commit -q --allow-empty -m first
SHA="$(git -C repo rev-parse HEAD)" python3 - <<'PY'
import json, os, random, statistics
random.seed(1)
for k in range(4):
    benches = []
    for b in range(14000):
        s = [round(100 + random.random() * 10 + k, 3) for _ in range(495)]
        benches.append({"name": f"big/{b}", "metrics": [{"name": "time", "unit": "ns",
            "direction": "lower", "value": statistics.median(s), "samples": s}]})
    doc = {"commit": os.environ["SHA"], "specs": {"cpu_model": "Big CPU", "logical_cores": 4,
           "physical_cores": 2, "memory_gib": 8, "arch": "x86_64", "virtualization": "none"},
           # Two suites: one holds at most 10,000 benchmarks, as a parser's document does.
           "suites": [{"suite": "s", "results": {"benchmarks": benches[:7000]}},
                      {"suite": "t", "results": {"benchmarks": benches[7000:]}}]}
    open(f"up{k}.json", "w").write(json.dumps(doc))
PY
"$kymo" serve --no-worker --listen 127.0.0.1:0 --db "$work/kymo.db" > serve.out 2> serve.err &
pid=$!
until [ -s serve.out ]; do sleep 0.1; done
server="$(grep -o 'http://[0-9.:]*' serve.out | head -1)"
KYMO_SERVER="$server" KYMO_DB="$work/kymo.db" "$kymo" repo add r "$work/repo" > /dev/null
token="$(cat "$work/kymo.db.admin-token")"
echo "before: $(grep VmHWM /proc/$pid/status)"
start=$(date +%s.%N)
for k in 0 1 2 3; do
  curl -s -o /dev/null -w "upload $k: %{http_code} in %{time_total}s\n" \
    -H "authorization: Bearer $token" -H "content-type: application/json" \
    --data-binary "@up$k.json" "$server/api/v1/repos/r/results" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
echo "all four in $(echo "$(date +%s.%N) - $start" | bc) s"
echo "after: $(grep VmHWM /proc/$pid/status)"
