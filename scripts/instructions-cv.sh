#!/usr/bin/env bash
# How much wall time and instruction counts of kymo's kernels move between runs of identical
# code: RUNS runs of `kymo-kernels --quick --json --instructions` (a release build) on an idle
# machine, then RUNS more with two CPU-bound processes beside them. Prints a markdown table:
# per counted kernel, the coefficient of variation (standard deviation / mean, in %) of its
# median wall time (throughput for fair_queue) and of its instruction count, idle and loaded.
#
#   scripts/instructions-cv.sh [RUNS]      # default 10; about 15 s per run on 2 cores
#   KYMO_KERNELS="target/release/kymo kernels" scripts/instructions-cv.sh   # a built binary
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
if [ -z "${KYMO_KERNELS:-}" ]; then
  target="${CARGO_TARGET_DIR:-target}"
  cargo build --release -q -p bench-kernels --bin kymo-kernels
  KYMO_KERNELS="$(realpath "$target/release/kymo-kernels")"
fi
read -r -a kernels <<<"$KYMO_KERNELS"
out="$(mktemp -d)"
burners=()
stop_burners() {
  for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
  burners=()
}
trap 'stop_burners; rm -rf "$out"' EXIT

measure() { # $1: idle | loaded
  # The count run has its own filter: only the kernels with counted regions run twice.
  for i in $(seq 1 "$runs"); do
    "${kernels[@]}" --quick --json --instructions \
      --filter ring/ --filter bus/ --filter fair_queue/ --filter log_read/ \
      > "$out/$1.$i.json" 2>/dev/null
  done
}

measure idle
for _ in 1 2; do
  sh -c 'while :; do :; done' &
  burners+=("$!")
done
measure loaded
stop_burners

python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])

def headline(metric):
    samples = metric.get("samples")
    return statistics.median(samples) if samples else metric["value"]

def cv(values):
    mean = statistics.mean(values)
    return 100 * statistics.pstdev(values) / mean if mean else float("nan")

table = {}
for mode in ("idle", "loaded"):
    for i in range(1, runs + 1):
        for bench in json.load(open(f"{out}/{mode}.{i}.json"))["benchmarks"]:
            metrics = {m["name"]: m for m in bench["metrics"]}
            if "instructions" not in metrics:
                continue
            row = table.setdefault(bench["name"], {})
            # fair_queue reports its wall-clock figure as throughput, not time.
            wall = metrics.get("time") or metrics["throughput"]
            row.setdefault((mode, "time"), []).append(headline(wall))
            row.setdefault((mode, "instructions"), []).append(metrics["instructions"]["value"])

print(f"| kernel | time CV idle | instructions CV idle | time CV loaded | instructions CV loaded | instructions (median) |")
print("|---|---:|---:|---:|---:|---:|")
for name, row in table.items():
    cells = [f"{cv(row[(mode, metric)]):.2f} %" for mode in ("idle", "loaded") for metric in ("time", "instructions")]
    median = statistics.median(row[("idle", "instructions")])
    print(f"| {name} | {' | '.join(cells)} | {median:,.0f} |")
PY
