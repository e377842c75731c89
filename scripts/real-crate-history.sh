#!/usr/bin/env bash
# Builds a git repository whose commits are successive published versions of a crate, from
# the crates.io registry (one commit per version, dated as published order), with a
# docs-only commit after each version: code that did not change, for verdicts to leave alone.
# No benchmark lives in it: kymo's suites kept on the server measure every version.
#
#   scripts/real-crate-history.sh CRATE DIR VERSION...
#   scripts/real-crate-history.sh hex /tmp/hex-history 0.3.0 0.3.1 0.3.2 0.4.0 0.4.1 0.4.2 0.4.3
set -euo pipefail
crate="$1"; dir="$2"; shift 2
[ $# -gt 0 ] || { echo "usage: $0 CRATE DIR VERSION..." >&2; exit 2; }
rm -rf "$dir"; mkdir -p "$dir"
git -C "$dir" init -q -b main
git -C "$dir" config user.name "kymo trial"
git -C "$dir" config user.email "trial@kymo.invalid"
downloads="$(mktemp -d)"
trap 'rm -rf "$downloads"' EXIT
when=1600000000
for version in "$@"; do
  curl -sSfL -o "$downloads/$crate.crate" "https://static.crates.io/crates/$crate/$crate-$version.crate"
  # Replace the tree with this version's published sources (keeping .git).
  find "$dir" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
  tar -xzf "$downloads/$crate.crate" -C "$dir" --strip-components=1
  rm -f "$dir/Cargo.lock" "$dir/.cargo_vcs_info.json"
  git -C "$dir" add -A
  when=$((when + 86400))
  GIT_AUTHOR_DATE="@$when" GIT_COMMITTER_DATE="@$when" git -C "$dir" commit -qm "$crate $version"
  echo "release notes for $crate $version" >> "$dir/NOTES.md"
  git -C "$dir" add NOTES.md
  when=$((when + 3600))
  GIT_AUTHOR_DATE="@$when" GIT_COMMITTER_DATE="@$when" git -C "$dir" commit -qm "docs: notes for $version"
done
git -C "$dir" log --oneline | cat
