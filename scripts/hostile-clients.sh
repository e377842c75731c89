#!/usr/bin/env bash
# Hostile clients (a measurement, not a CI step): `kymo serve` limited to 1,024 open files,
# with a repository of two commits × 200 benchmarks uploaded through the API, is hit by
#   1. 1,100 silent sockets: is /healthz answered, and when are the sockets closed?
#   2. wrk at 64 connections on the compare page, anonymous and with `Cookie: a=b`.
# Usage: scripts/hostile-clients.sh [KYMO_BINARY]   (default: the debug build)
# Needs wrk (Debian: apt-get install wrk), curl, git and python3. SECONDS_PER_RUN=10.
set -euo pipefail
cd "$(dirname "$0")/.."
kymo="${1:-${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}/debug/kymo}"
seconds="${SECONDS_PER_RUN:-10}"
work="$(mktemp -d)"
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

git -C "$work" init -q -b main repo
for n in 1 2; do
  echo "$n" >"$work/repo/file"
  git -C "$work/repo" add file
  git -C "$work/repo" -c user.name=k -c user.email=k@k commit -qm "commit $n"
done

prlimit --nofile=1024:1024 "$kymo" serve --no-worker --listen 127.0.0.1:0 \
  --db "$work/kymo.db" >"$work/serve.out" 2>"$work/serve.err" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -qs http "$work/serve.out" && break; sleep 0.1; done
url="$(grep -o 'http://[0-9.:]*' "$work/serve.out")"
token="$(cat "$work/kymo.db.admin-token")"
KYMO_SERVER="$url" KYMO_TOKEN="$token" "$kymo" repo add app "$work/repo" >/dev/null

for sha in $(git -C "$work/repo" rev-list main); do
  python3 - "$sha" >"$work/upload.json" <<'EOF'
import json, sys
bench = [{"name": f"group/bench_{i}", "metrics": [{"name": "time", "unit": "ns",
          "direction": "lower", "value": 100.45 + i,
          "samples": [100.0 + i + s * 0.1 for s in range(10)]}]}
         for i in range(200)]
spec = {"cpu_model": "Load CPU", "logical_cores": 2, "physical_cores": 1, "memory_gib": 4,
        "arch": "x86_64", "virtualization": "none"}
print(json.dumps({"commit": sys.argv[1], "specs": spec,
                  "suites": [{"suite": "s", "results": {"benchmarks": bench}}]}))
EOF
  curl -sf -o /dev/null -H "authorization: Bearer $token" -H 'content-type: application/json' \
    --data-binary @"$work/upload.json" "$url/api/v1/repos/app/results"
done
head="$(git -C "$work/repo" rev-parse main)"

echo "== 1,100 silent sockets against a server limited to 1,024 open files"
python3 - "$url" <<'EOF'
import socket, sys, time, urllib.request
host, port = sys.argv[1].split("//")[1].split(":")
socks = []
for _ in range(1100):
    s = socket.socket(); s.connect((host, int(port))); socks.append(s)
start = time.time()
def healthz():
    try:
        return urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=2).status == 200
    except Exception:
        return False
first_ok = None
while time.time() - start < 30:
    if healthz():
        first_ok = time.time() - start
        break
    time.sleep(0.2)
print(f"healthz answered {first_ok:.1f} s after the flood" if first_ok is not None
      else "healthz did not answer within 30 s")
for s in socks: s.settimeout(0)
closed_by, open_count = None, len(socks)
deadline = time.time() + 15
while time.time() < deadline:
    open_count = 0
    for s in socks:
        try:
            if s.recv(1) != b"": open_count += 1
        except BlockingIOError: open_count += 1
        except OSError: pass
    if open_count == 0:
        closed_by = time.time() - start
        break
    time.sleep(0.5)
print(f"all 1,100 silent sockets closed by the server after {closed_by:.1f} s" if closed_by
      else f"{open_count} silent sockets still open {time.time() - start:.0f} s after the flood")
EOF

echo "== wrk -c64 -d${seconds}s on the compare page (200 series)"
page="$url/repos/app/compare/$head"
curl -sf -o /dev/null "$page"
for cookie in "" "a=b"; do
  echo "-- cookie: ${cookie:-none}"
  if [ -n "$cookie" ]; then
    wrk -t2 -c64 -d"${seconds}s" --latency -H "Cookie: $cookie" "$page" | grep -E "Requests/sec|99%|Non-2xx|errors"
  else
    wrk -t2 -c64 -d"${seconds}s" --latency "$page" | grep -E "Requests/sec|99%|Non-2xx|errors"
  fi
done
