# Sourced by load.sh and load-scale.sh: the pages they measure and wrk's figures of a run.

# load_pages HEAD BASE: sets `pages` to the home, repository, benchmark, compare (BASE...HEAD),
# series API and commit API (HEAD) pages of the generated repository `load`.
load_pages() {
  pages=(
    "/"
    "/repos/load"
    "/repos/load/benchmarks/group_0/bench_0"
    "/repos/load/compare/$2...$1"
    "/api/v1/repos/load/series?benchmark=group_0/bench_0&metric=metric_0"
    "/api/v1/repos/load/commits/$1"
  )
}

# wrk_figures LOG: requests/s, p50, p99 and errors (non-2xx answers and socket errors, wrk's
# timeouts included) of a `wrk --latency` log, as table cells.
wrk_figures() {
  local log="$1" rps p50 p99 non2xx sock
  rps=$(awk '/Requests\/sec/ {print $2}' "$log")
  p50=$(awk '$1 == "50%" {print $2}' "$log")
  p99=$(awk '$1 == "99%" {print $2}' "$log")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$log")
  sock=$(awk '/Socket errors/ {gsub(",", ""); print $4 + $6 + $8 + $10}' "$log")
  printf '%s | %s | %s | %s' "${rps:-?}" "${p50:-?}" "${p99:-?}" "$(( ${non2xx:-0} + ${sock:-0} ))"
}
