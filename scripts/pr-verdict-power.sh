#!/usr/bin/env bash
# How sensitive and how quiet the pull request verdict is, on a real crate's own benchmark.
#
# The crate is `adler2` (the Adler-32 checksum, from crates.io) with its own criterion
# benchmark `simple-1m/ones-1m` (1 MiB a call) and a small example that checksums 24 × 1 MiB,
# whose instructions `instructions = true` counts. Slowdowns are real code changes inside the
# routine: `Adler32::write_slice` checksums a further P % of its input (a throwaway checksum,
# kept by `black_box`; P may be a decimal such as 0.4), so about P % more work and time. The
# counts say how much exactly: a short slice costs more per byte, so 1 % more input is 2.6 %
# more instructions. Each branch is judged by `kymo try` (adaptive interleaved rounds within the
# repository's default budget), RUNS times per level and 2 × RUNS times for the unchanged
# branch (a README change), idle and then beside one CPU-bound process.
#
#   scripts/pr-verdict-power.sh [KYMO_BINARY] [RUNS]   # default: target/debug/kymo, 10
#   LEVELS="0 1 5 10" CONDITIONS="idle hog" scripts/pr-verdict-power.sh ...
#   KEEP=DIR scripts/pr-verdict-power.sh ...   # keeps the work (repository, database) in DIR
#
# Prints, per condition and level: how often the time and the instruction counts said
# `regression`, `no_change` and `inconclusive`, the median rounds, the median change each
# verdict could have seen, and how many rows lacked that figure (must be 0). Needs git, curl,
# python3, cargo (crates.io reachable: the suite downloads criterion into its own home) and
# valgrind.
set -euo pipefail
levels="${LEVELS:-0 1 5 10}"
conditions="${CONDITIONS:-idle hog}"
kymo="$(realpath "${1:-target/debug/kymo}")"
runs="${2:-10}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
pid=""
hog=""
cleanup() {
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null
  if [ -n "${KEEP:-}" ]; then rm -rf "$KEEP" && mv "$work" "$KEEP"; else rm -rf "$work"; fi
}
trap cleanup EXIT
cd "$work"

"$here/real-crate-history.sh" adler2 repo 2.0.1 > /dev/null
g() { git -C repo -c user.name=k -c user.email=k@k "$@"; }
# The published manifest dropped its dev-dependency on criterion; the bench needs it back.
python3 - repo/Cargo.toml <<'PY'
import sys
path = sys.argv[1]
text = open(path).read().replace("[dev-dependencies]\n", "")
text += '\n[dev-dependencies]\ncriterion = { version = "0.5", default-features = false, features = ["cargo_bench_support"] }\n'
text += '\n[[example]]\nname = "work"\npath = "examples/work.rs"\n'
open(path, "w").write(text)
PY
mkdir -p repo/examples
cat > repo/examples/work.rs <<'RS'
//! A fixed amount of checksumming, for instruction counts: 24 × 1 MiB, each call timed (so
//! its time has samples of its own, and its verdict is as quick to decide as criterion's).
use std::time::Instant;

fn main() {
    let data = vec![0xffu8; 1 << 20];
    let mut all = 0u32;
    let mut samples = Vec::new();
    for _ in 0..24 {
        let start = Instant::now();
        all ^= adler2::adler32_slice(std::hint::black_box(&data));
        samples.push(start.elapsed().as_nanos().to_string());
    }
    let samples = samples.join(",");
    println!(
        "{{\"benchmarks\":[{{\"name\":\"adler32/1MiB\",\"params\":{{\"checksum\":\"{all}\"}},\"metrics\":[{{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[{samples}]}}]}}]}}"
    );
}
RS
cat > repo/kymo.toml <<'TOML'
[[suite]]
name = "adler2"
build = "CARGO_HOME=$HOME/cargo-home cargo bench --bench bench --no-run"
run = "CARGO_HOME=$HOME/cargo-home cargo bench --bench bench -- --warm-up-time 0.5 --measurement-time 1.5 --noplot \"${KYMO_BENCH_FILTER:-^simple-1m/ones-1m$}\""
format = "criterion"
timeout = "20m"

[[suite]]
name = "work"
build = "CARGO_HOME=$HOME/cargo-home cargo build --release --example work"
run = "$CARGO_TARGET_DIR/release/examples/work"
format = "kymo"
instructions = true
timeout = "5m"
TOML
g add -A && g commit -qm "bench: criterion back as a dev-dependency, a fixed workload to count"
base="$(g rev-parse HEAD)"
for pct in $levels; do
  g checkout -qb "level-$pct" "$base"
  if [ "$pct" = 0 ]; then
    echo "Documented again." >> repo/README.md
  else
    python3 - repo/src/lib.rs "$pct" <<'PY'
import sys
path, pct = sys.argv[1], sys.argv[2]
per_mille = round(float(pct) * 10)
text = open(path).read()
old = "    pub fn write_slice(&mut self, bytes: &[u8]) {\n        self.compute(bytes);\n"
new = old + (
    f"        // {pct} % more input: a throwaway checksum of that share of it.\n"
    f"        let mut spare = Self::new();\n"
    f"        spare.compute(&bytes[..bytes.len() * {per_mille} / 1000]);\n"
    f"        core::hint::black_box(spare);\n"
)
assert old in text
open(path, "w").write(text.replace(old, new))
PY
  fi
  g add -A && g commit -qm "level $pct"
done
g checkout -q main

"$kymo" serve --listen 127.0.0.1:0 --db "$work/kymo.db" > serve.out 2> serve.err &
pid=$!
until [ -s serve.out ]; do sleep 0.1; done
export KYMO_SERVER="$(grep -o 'http://[0-9.:]*' serve.out | head -1)"
export KYMO_DB="$work/kymo.db"
"$kymo" repo add app "$work/repo" > /dev/null

# One try run: its JSON view, summarised as one line by summarise() below.
one_run() {
  local status=0
  "$kymo" try app "level-$1" --base "$base" --json > run.json 2> run.err || status=$?
  if [ "$status" = 2 ]; then echo "  (a try run failed: $(tail -1 run.err))" >&2; return; fi
  python3 - run.json >> "results-$2-$1.txt" <<'PY'
import json, sys
view = json.load(open(sys.argv[1]))
rows = view["report"]["rows"]
def row(benchmark, metric):
    for r in rows:
        if r["benchmark"].startswith(benchmark) and r["metric"] == metric:
            return r["verdict"]
    return {}
time = row("simple-1m/ones-1m", "time")
counts = row("work", "instructions")
missing = sum(1 for r in rows if r["verdict"].get("detectable_pct") is None)
print(view["rounds_run"], time.get("kind"), time.get("detectable_pct"), time.get("change_pct"),
      counts.get("kind"), counts.get("change_pct"), missing)
PY
}

report() {
  local condition="$1"
  echo "== $condition: $(uptime | sed 's/.*load average/load average/')"
  printf '%-6s %-5s %-36s %-38s %-7s %-10s %s\n' slower runs "time: regression/no_change/inconcl." \
    "counts: regression/no_change/inconcl." rounds "could see" "rows without it"
  for pct in $levels; do
    n="$runs"; [ "$pct" = 0 ] && n=$((2 * runs))
    for _ in $(seq 1 "$n"); do one_run "$pct" "$condition"; done
    python3 - "results-$condition-$pct.txt" "$pct" "$n" <<'PY'
import statistics, sys
path, pct, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [l.split() for l in open(path)] if __import__("os").path.exists(path) else []
def count(i, kind): return sum(1 for l in lines if l[i] == kind)
rounds = statistics.median(int(l[0]) for l in lines) if lines else 0
seen = [float(l[2]) for l in lines if l[2] != "None"]
power = f"{statistics.median(seen):.1f} %" if seen else "-"
missing = sum(int(l[6]) for l in lines)
print(f"{pct + ' %':<6} {len(lines):<5} "
      f"{count(1, 'regression')}/{count(1, 'no_change')}/{count(1, 'inconclusive'):<30} "
      f"{count(4, 'regression')}/{count(4, 'no_change')}/{count(4, 'inconclusive'):<32} "
      f"{rounds:<7} {power:<10} {missing}")
PY
  done
}

for condition in $conditions; do
  if [ "$condition" = hog ]; then
    sh -c 'while :; do :; done' &
    hog=$!
  fi
  report "$condition"
done
