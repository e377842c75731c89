#!/usr/bin/env bash
# The browser tests: builds `kymo`, serves a fresh database with a 25-commit git repository and
# synthetic results (a +30 % step at commit 15), then drives Debian's Chromium through the
# dashboard with playwright-core (e2e/*.test.mjs, node's own test runner). Screenshots of every
# step land in target/e2e/ (or KYMO_E2E_SHOTS). Needs `scripts/setup.sh` to have run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}"
export SQLX_OFFLINE=true

COMMITS=25
STEP=15
REPO=e2e
export KYMO_E2E_SHOTS="${KYMO_E2E_SHOTS:-target/e2e}"

missing() {
  echo "e2e: $1 is missing: run scripts/setup.sh" >&2
  exit 1
}
[ -d node_modules/playwright-core ] || missing playwright-core
[ -x "${KYMO_CHROMIUM:-/usr/bin/chromium}" ] || missing Chromium

# Debug is enough, and shares the target directory with `cargo test`.
cargo build --locked --quiet --bin kymo
kymo="$CARGO_TARGET_DIR/debug/kymo"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  local status=$?
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$status" != 0 ] && [ -f "$work/server.log" ]; then
    echo "e2e failed (exit $status); screenshots of the steps so far are in $KYMO_E2E_SHOTS/;" \
      "the server's log ends with:" >&2
    tail -n 40 "$work/server.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

mkdir -p "$KYMO_E2E_SHOTS"
rm -f "$KYMO_E2E_SHOTS"/*.png

# The tracked repository: one commit per hour, so that the pages show distinct dates.
git init -q -b main "$work/repo"
for i in $(seq 1 "$COMMITS"); do
  echo "$i" >"$work/repo/counter.txt"
  git -C "$work/repo" add counter.txt
  when="@$((1767268800 + i * 3600)) +0000"
  GIT_AUTHOR_DATE="$when" GIT_COMMITTER_DATE="$when" git -C "$work/repo" \
    -c user.name="kymo e2e" -c user.email="e2e@kymo.invalid" -c commit.gpgsign=false \
    commit -q -m "commit $i"
done

# Requests are logged, so that the log tail printed on failure shows what the browser asked.
log_filter="info,tower_http::trace::make_span=debug,tower_http::trace::on_response=debug"
NO_COLOR=1 RUST_LOG="${RUST_LOG:-$log_filter}" \
  "$kymo" serve --no-worker --db "$work/kymo.db" --listen 127.0.0.1:0 >"$work/server.log" 2>&1 &
server_pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -om1 'http://127\.0\.0\.1:[0-9]*' "$work/server.log" || true)"
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "e2e: kymo serve exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "e2e: kymo serve printed no address" >&2; exit 1; }
export KYMO_SERVER="$url"
# The CLI on the server's machine finds the admin token beside the database.
export KYMO_DB="$work/kymo.db"
KYMO_E2E_ADMIN_TOKEN="$(cat "$work/kymo.db.admin-token")"
export KYMO_E2E_ADMIN_TOKEN

"$kymo" repo add "$REPO" "$work/repo" >/dev/null
node e2e/results.mjs "$work/results" "$COMMITS" "$STEP"
i=0
for sha in $(git -C "$work/repo" rev-list --reverse main); do
  i=$((i + 1))
  results="$work/results/$(printf %02d "$i")/micro.json"
  "$kymo" upload --repo "$REPO" --commit "$sha" "$results" >/dev/null
done

KYMO_E2E_STEP_SHA="$(git -C "$work/repo" rev-list --reverse main | sed -n "${STEP}p")" \
  KYMO_E2E_URL="$url" KYMO_E2E_REPO="$REPO" node --test e2e/
