#!/usr/bin/env bash
# What the suite boundary costs kymo's own kernels: `kymo-kernels --quick --json` (a release
# build) run outside and inside the boundary, and inside with one factor at a time (allow-listed
# environment, dropped capabilities, resource limits, cgroups, Landlock), interleaved in rotating
# order over ROUNDS rounds in one run. Prints a markdown table: per kernel, the median outside
# time and each mode's median ratio to the outside run of the same round.
#
#   scripts/sandbox-overhead.sh [ROUNDS]      # default 7; about 20 s per round on 2 cores
#   KYMO_KERNELS_ARGS="--filter ring/write_path" scripts/sandbox-overhead.sh 41   # a closer look
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p bench-kernels --bin kymo-kernels
KYMO_KERNELS="$(realpath "$target/release/kymo-kernels")" KYMO_ROUNDS="$rounds" \
    cargo test -q -p kymo-worker --lib kernel_overhead -- --ignored --nocapture
