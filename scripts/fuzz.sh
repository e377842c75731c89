#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 150), two at a time, then minimizes
# each corpus. Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# Not part of CI: findings land in fuzz/artifacts/<target>/ and a summary in fuzz/last-run.txt.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/../fuzz"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target-fuzz}"
seconds="${1:-150}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O >/dev/null
: > last-run.txt
run() {
  local t="$1"
  mkdir -p "corpus/$t"
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1 >"/tmp/kymo-fuzz-$t.log" 2>&1
  local rc=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "/tmp/kymo-fuzz-$t.log" | grep -o '[0-9]*$')
  local cov
  cov=$(grep -o 'cov: [0-9]*' "/tmp/kymo-fuzz-$t.log" | tail -1)
  echo "$t: exit $rc, ${execs:-?} runs in ${seconds}s, ${cov:-cov ?}" >> last-run.txt
}
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run "${targets[$i]}" &
  if [ $((i + 1)) -lt ${#targets[@]} ]; then run "${targets[$((i + 1))]}" & fi
  wait
done
for t in "${targets[@]}"; do
  # Keep one input per edge covered (not per hit-count bucket): a small corpus to commit.
  cargo +nightly fuzz cmin -O "$t" "corpus/$t" -- -set_cover_merge=1 -use_counters=0 >/dev/null 2>&1
done
cat last-run.txt
