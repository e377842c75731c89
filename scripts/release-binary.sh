#!/usr/bin/env bash
# Builds the `kymo` release binary for x86_64 glibc Linux that CI jobs download (docs/CI.md):
# OpenSSL, libgit2 and zlib are built from source and linked in (the `static-release` feature
# of kymo-server; SQLite is bundled already), so the only shared libraries it needs are the C
# library's. Checks that with ldd and fails on anything else. Prints the binary's path.
#
#   scripts/release-binary.sh [OUT]     (OUT: where to copy it; default target/kymo-linux-x86_64)
#
# Needs what building OpenSSL from source needs: a C compiler, make and perl.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/kymo-target}"
export SQLX_OFFLINE=true
out="${1:-target/kymo-linux-x86_64}"

cargo build --release --locked -p kymo-server --bin kymo --features static-release >&2
binary="$CARGO_TARGET_DIR/release/kymo"

# The C library's own shared objects: glibc (libc, libm and the helpers split out of it by
# older releases), the dynamic loader, the kernel's vDSO, and GCC's unwinder, which glibc
# itself loads for thread cancellation and Rust links for panics.
allowed='^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1)$'
libraries=$(ldd "$binary" | awk '{print $1}')
unexpected=$(grep -Ev "$allowed" <<<"$libraries" || true)
if [[ -n "$unexpected" ]]; then
    echo "release-binary: $binary needs shared libraries beyond the C library's:" >&2
    echo "$unexpected" >&2
    exit 1
fi
echo "release-binary: needs only $(tr '\n' ' ' <<<"$libraries")" >&2
# The newest glibc symbol version it asks for: the oldest glibc it runs on.
glibc=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
echo "release-binary: runs on glibc ${glibc#GLIBC_} or newer" >&2
"$binary" --version >&2
mkdir -p "$(dirname "$out")"
install -m 0755 "$binary" "$out"
sha256sum "$out" >&2
echo "$out"
