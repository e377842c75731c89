#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test kymo: git (for the tests' repositories),
# a C toolchain for SQLite and libgit2, Chromium for the browser tests, valgrind for instruction
# counts, and htmx and playwright-core from the npm registry (package-lock.json).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v git >/dev/null || need_apt+=(git)
command -v cc >/dev/null || need_apt+=(build-essential)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
# libgit2's https transport links the system OpenSSL.
pkg-config --exists openssl 2>/dev/null || need_apt+=(libssl-dev)
# scripts/e2e.sh drives Debian's Chromium (playwright-core downloads no browser of its own).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# The webhook tests' git hook signs and posts its payload with openssl and curl.
command -v openssl >/dev/null || need_apt+=(openssl)
command -v curl >/dev/null || need_apt+=(curl)
# Instruction counts (`kymo-kernels --instructions`, a suite's `instructions = true`, the demo)
# run the benchmark under valgrind's callgrind.
command -v valgrind >/dev/null || need_apt+=(valgrind)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  else
    echo "kymo needs: ${need_apt[*]} (install them with your package manager)" >&2
    exit 1
  fi
fi

if command -v npm >/dev/null; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "npm not found: the dashboard will work without htmx (less interactively)" >&2
fi
