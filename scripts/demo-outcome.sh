#!/usr/bin/env bash
# The demo's verdicts idle and on a noisy machine: runs `kymo demo --no-serve` RUNS times with
# nothing added, then RUNS times while BUSY CPU-bound processes switch on and off beside it
# (each busy 0.5-4 s, then idle 0.5-3 s, at random), and prints one line per run: the
# condition, the wall time, the story commits found and the neutral commits flagged, then what
# confirmation measured again and refuted. Pass extra demo flags in DEMO_FLAGS (`--no-confirm`).
#
#   scripts/demo-outcome.sh [KYMO_BINARY] [RUNS]      (BUSY=2 by default)
#
# CONDITIONS="bursty" runs only the busy half (default: "idle bursty").
#
# The load average before each run is printed too: other work on a shared machine is load the
# script does not control.
set -euo pipefail

kymo="${1:-target/release/kymo}"
runs="${2:-3}"
busy="${BUSY:-2}"
work="$(mktemp -d)"
hogs=()
stop_hogs() {
  if ((${#hogs[@]})); then kill "${hogs[@]}" 2>/dev/null || true; fi
  hogs=()
}
trap 'stop_hogs; rm -rf "$work"' EXIT

# One CPU-bound process that works and rests for random spells until it is killed.
bursty() {
  while :; do
    timeout "$(awk -v r="$RANDOM" 'BEGIN { printf "%.1f", 0.5 + 3.5 * r / 32767 }')" \
      sh -c 'while :; do :; done' || true
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.1f", 0.5 + 2.5 * r / 32767 }')"
  done
}

run_once() {
  local condition="$1" i="$2" out="$work/$1-$2.log" start end load
  rm -rf "$work/data"
  load="$(cut -d' ' -f1 /proc/loadavg)"
  start=$(date +%s)
  # shellcheck disable=SC2086 # DEMO_FLAGS is a list of flags
  "$kymo" demo --no-serve --data "$work/data" ${DEMO_FLAGS:-} >"$out" 2>&1 ||
    echo "(demo exited $?)" >>"$out"
  end=$(date +%s)
  printf '%-8s %2s  load %5s  %4ss  %s\n' "$condition" "$i" "$load" \
    "$((end - start))" "$(grep -m1 'story commits found' "$out" || tail -n1 "$out")"
  grep -E '^  (missed|flagged without a change|refuted .*):|^confirmation:|^benchmarked' "$out" |
    sed 's/^ */              /' || true
}

conditions="${CONDITIONS:-idle bursty}"
printf '%-8s %2s  %-10s  %5s  %s\n' condition run "" time outcome
if [[ " $conditions " == *" idle "* ]]; then
  for i in $(seq 1 "$runs"); do run_once idle "$i"; done
fi
if [[ " $conditions " == *" bursty "* ]]; then
  for _ in $(seq 1 "$busy"); do
    bursty &
    hogs+=("$!")
  done
  for i in $(seq 1 "$runs"); do run_once bursty "$i"; done
fi
