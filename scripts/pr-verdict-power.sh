#!/usr/bin/env bash
# How sensitive and how quiet the pull request verdict is on this machine. A benchmark that
# really works (a shell loop of N steps, timed five times with the clock) is judged on branches
# that make it 2, 5, 10 and 20 % slower (RUNS times each) and on an unchanged branch
# (2 × RUNS times), two ways:
#   try:    `kymo try` — head and merge base measured interleaved, 3 rounds, in one job;
#   stored: the head measured on its own (`kymo run`) and compared with the merge base's
#           stored result and the tracked branch's history (`kymo compare`), as a dashboard
#           that only follows the branch would judge it.
# Both idle, then with a CPU-bound process running beside them (started after the branch's
# stored results were measured, as load that comes and goes does).
#
#   scripts/pr-verdict-power.sh [KYMO_BINARY] [RUNS]   # default: target/debug/kymo, 10
#   LEVELS="0 40 80" scripts/pr-verdict-power.sh ...   # other slowdowns (0 is always 2 × RUNS)
set -euo pipefail
levels="${LEVELS:-0 2 5 10 20}"
kymo="$(realpath "${1:-target/debug/kymo}")"
runs="${2:-10}"
work="$(mktemp -d)"
hog=""
trap 'kill "$pid" $hog 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
steps=20000
git init -q -b main repo
g() { git -C repo -c user.name=k -c user.email=k@k "$@"; }
cat > repo/kymo.toml <<'TOML'
[[suite]]
name = "loop"
run = "sh bench.sh"
format = "kymo"
timeout = "60s"
TOML
cat > repo/bench.sh <<'SH'
n=$(cat work.txt)
samples=""
for s in 1 2 3 4 5; do
  start=$(date +%s%N)
  i=0
  while [ "$i" -lt "$n" ]; do i=$((i + 1)); done
  end=$(date +%s%N)
  samples="$samples${samples:+,}$((end - start))"
done
echo "{\"benchmarks\":[{\"name\":\"loop\",\"metrics\":[{\"name\":\"time\",\"unit\":\"ns\",\"direction\":\"lower\",\"samples\":[$samples]}]}]}"
SH
echo "$steps" > repo/work.txt
g add -A && g commit -qm first
# History for the stored way: ten commits of the same code.
for i in $(seq 1 10); do echo "$i" > repo/README; g add -A; g commit -qm "docs $i"; done
base="$(g rev-parse HEAD)"
for pct in $levels; do
  g checkout -qb "slow-$pct" "$base"
  echo $((steps * (100 + pct) / 100)) > repo/work.txt
  echo "branch $pct" > repo/BRANCH
  g add -A && g commit -qm "slower by $pct %"
done
g checkout -q main

"$kymo" serve --listen 127.0.0.1:0 --db "$work/kymo.db" > serve.out 2> serve.err &
pid=$!
until [ -s serve.out ]; do sleep 0.1; done
export KYMO_SERVER="$(grep -o 'http://[0-9.:]*' serve.out | head -1)"
export KYMO_DB="$work/kymo.db"
"$kymo" repo add app "$work/repo" > /dev/null

idle_queue() {
  while "$kymo" jobs --json | grep -q '"state": *"\(queued\|running\)"'; do sleep 0.3; done
}
"$kymo" run app --last 11 > /dev/null
idle_queue

# One way, one branch, RUNS times: how often the verdict said "regression".
judge_try() {
  local flagged=0
  for _ in $(seq 1 "$1"); do
    status=0
    "$kymo" try app "slow-$2" > /dev/null 2>&1 || status=$?
    [ "$status" = 1 ] && flagged=$((flagged + 1))
    [ "$status" = 2 ] && echo "  (a try run failed)" >&2
  done
  echo "$flagged"
}
judge_stored() {
  local flagged=0 n=0
  for _ in $(seq 1 "$1"); do
    n=$((n + 1))
    g checkout -q "slow-$2"
    echo "$RANDOM $n" > repo/TRIAL
    g add -A && g commit -qm "trial $n"
    head="$(g rev-parse HEAD)"
    g checkout -q main
    "$kymo" run app "$head" > /dev/null
    idle_queue
    "$kymo" compare "$base" "$head" --repo app > /dev/null 2>&1 || flagged=$((flagged + 1))
  done
  echo "$flagged"
}

report() {
  echo "== $1"
  printf '%-8s %-7s %s\n' way slower "flagged as a regression"
  for way in try stored; do
    for pct in $levels; do
      n="$runs"; [ "$pct" = 0 ] && n=$((2 * runs))
      printf '%-8s %5s %% %s of %s\n' "$way" "$pct" "$("judge_$way" "$n" "$pct")" "$n"
    done
  done
}

report "idle (other processes of this shared machine aside)"
sh -c 'while :; do :; done' &
hog=$!
report "with one CPU-bound process beside it"
