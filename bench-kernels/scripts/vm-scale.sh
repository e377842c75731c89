#!/usr/bin/env bash
# Suite B of rondo's write-up: N concurrent micro-VMs, each embedding the metrics store
# (16 series x 3 tiers) and recording every tick of a four-phase guest workload.
#
# Launches `kymo-kernels vmm` N times with a staggered start (100 ms per VM, 500 ms more
# every 10th), samples each VMM's VmRSS from /proc/PID/status every second, and reports per N: VMs that
# succeeded, peak total RSS, store bytes per VM (apparent and on disk), extra processes
# (anything but the VMMs and this script's own sleeps), wall time, and the mode that ran
# (kvm, or process where /dev/kvm is not usable).
#
# Usage: scripts/vm-scale.sh [--vms "4 8 16"] [--full] [--duration SECONDS]
#                            [--tick-ms MS] [--mode auto|kvm|process] [--bin PATH]
#   --full  the write-up's sizes: 10, 50 and 100 VMs.
set -euo pipefail

vms="4 8 16"
duration=15
tick_ms=1000
mode=auto
bin=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --vms) vms="$2"; shift 2 ;;
        --full) vms="10 50 100"; shift ;;
        --duration) duration="$2"; shift 2 ;;
        --tick-ms) tick_ms="$2"; shift 2 ;;
        --mode) mode="$2"; shift 2 ;;
        --bin) bin="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "vm-scale: unknown option $1" >&2; exit 2 ;;
    esac
done

if [[ -z "$bin" ]]; then
    crate_dir="$(cd "$(dirname "$0")/.." && pwd)"
    (cd "$crate_dir" && cargo build --release -p bench-kernels --bin kymo-kernels >&2)
    target_dir="${CARGO_TARGET_DIR:-$(cd "$crate_dir/.." && pwd)/target}"
    bin="$target_dir/release/kymo-kernels"
fi
[[ -x "$bin" ]] || { echo "vm-scale: $bin is not executable" >&2; exit 1; }

rss_kb() { # VmRSS of one pid in kB, 0 once it has exited; builtins only, no fork per pid
    local key value _
    while read -r key value _; do
        if [[ "$key" == "VmRSS:" ]]; then
            echo "$value"
            return
        fi
    done 2>/dev/null <"/proc/$1/status" || true
    echo 0
}

self_comm="$(cat /proc/$$/comm)"
extra_processes() { # children of this script other than the VMMs and its own helpers
    local count=0 stat pid comm rest ppid
    for stat in /proc/[0-9]*/stat; do
        read -r pid comm rest 2>/dev/null <"$stat" || continue
        read -r _ ppid _ <<<"$rest"
        [[ "$ppid" == "$$" ]] || continue
        case "$comm" in "(kymo-kernels)"|"(sleep)"|"($self_comm)") ;; *) count=$((count + 1)) ;; esac
    done
    echo "$count"
}

printf '%-5s %-9s %-13s %-16s %-16s %-7s %-8s %s\n' \
    VMs Success "Peak RSS" "Store/VM" "Store disk/VM" Extra Wall Mode
for n in $vms; do
    work="$(mktemp -d)"
    start_ns=$(date +%s%N)
    pids=()
    peak=0
    extra_peak=0
    sample() {
        local total=0 pid extra
        for pid in "${pids[@]}"; do total=$((total + $(rss_kb "$pid"))); done
        ((total > peak)) && peak=$total
        extra=$(extra_processes)
        ((extra > extra_peak)) && extra_peak=$extra
        return 0
    }
    for ((i = 1; i <= n; i++)); do
        "$bin" vmm --mode "$mode" --duration "$duration" --tick-ms "$tick_ms" \
            --store "$work/vm$i.store" >"$work/vm$i.json" 2>"$work/vm$i.err" &
        pids+=($!)
        sleep 0.1
        if ((i % 10 == 0)); then
            sleep 0.5
            sample
        fi
    done
    while :; do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)); done
        ((alive == 0)) && break
        sample
        sleep 1
    done
    failed_waits=0
    for pid in "${pids[@]}"; do wait "$pid" || failed_waits=$((failed_waits + 1)); done
    wall_s=$(awk -v a="$start_ns" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    ok=$(cat "$work"/vm*.json | grep -c '"ok":true' || true)
    modes=$(sed -n 's/.*"mode":"\([a-z]*\)".*/\1/p' "$work"/vm*.json | sort -u | paste -sd, -)
    store_bytes=$(stat -c %s "$work/vm1.store")
    store_disk_kb=$(du -k "$work/vm1.store" | cut -f1)
    printf '%-5s %-9s %-13s %-16s %-16s %-7s %-8s %s\n' \
        "$n" "$ok/$n" "$((peak / 1024)) MiB" "$((store_bytes / 1024)) KiB" \
        "$store_disk_kb KiB" "$extra_peak" "${wall_s} s" "${modes:-none}"
    if ((ok != n)); then
        echo "vm-scale: $((n - ok)) VMs failed; first error:" >&2
        cat "$work"/vm*.err | head -5 >&2
    fi
    rm -rf "$work"
done
