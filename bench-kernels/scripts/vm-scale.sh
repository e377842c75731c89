#!/usr/bin/env bash
# Suite B of rondo's write-up: N concurrent micro-VMs, each embedding the metrics store
# (16 series x 3 tiers) and recording every tick of a four-phase guest workload.
#
# Runs `kymo-kernels vm-scale`, which launches `kymo-kernels vmm` N times with a staggered
# start (100 ms per VM, 500 ms more every 10th), samples the VMMs' VmRSS from /proc while they
# run, and reports per N: VMs that succeeded, peak total RSS, each VM's own peak RSS, store
# bytes per VM (apparent and on disk), extra processes (anything but the VMMs), wall time,
# and the mode that ran (kvm, or process where /dev/kvm is not usable).
#
# Usage: scripts/vm-scale.sh [--json] [--vms "4 8 16"] [--full] [--duration SECONDS]
#                            [--tick-ms MS] [--mode auto|kvm|process] [--bin PATH] ...
#   --json  kymo JSON on stdout (one benchmark vm_scale/vms_N per count) instead of a table.
#   --full  the write-up's sizes: 10, 50 and 100 VMs.
#   Other options are vm-scale's own: `kymo-kernels vm-scale --help` lists them.
set -euo pipefail

bin=""
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bin) bin="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) args+=("$1"); shift ;;
    esac
done

if [[ -z "$bin" ]]; then
    crate_dir="$(cd "$(dirname "$0")/.." && pwd)"
    (cd "$crate_dir" && cargo build --release -p bench-kernels --bin kymo-kernels >&2)
    target_dir="${CARGO_TARGET_DIR:-$(cd "$crate_dir/.." && pwd)/target}"
    bin="$target_dir/release/kymo-kernels"
fi
[[ -x "$bin" ]] || { echo "vm-scale: $bin is not executable" >&2; exit 1; }

exec "$bin" vm-scale "${args[@]}"
