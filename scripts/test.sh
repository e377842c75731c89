#!/usr/bin/env bash
# The test command: sets up what is missing, then runs every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}"
export SQLX_OFFLINE=true
scripts/setup.sh
cargo test --workspace --locked "$@"
