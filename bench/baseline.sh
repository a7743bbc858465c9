#!/usr/bin/env bash
# bench/baseline.sh [REF] - builds luamcp as it was at REF (default
# $BASELINE_REF, else the newest v* tag, else a41d00b: the build issue #43
# measured start-up against) in a git worktree under build/bench/, once,
# and prints the binary's path. make bench runs the start-up beside it
# (bench/startup.sh), so that a regression shows in the same run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ref=${1:-${BASELINE_REF:-$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || echo a41d00b)}}
commit=$(git rev-parse --short "$ref^{commit}")
dir=$PWD/build/bench/baseline-$commit
if [ ! -x "$dir/build/luamcp" ]; then
  [ -d "$dir" ] || git worktree add -q --detach "$dir" "$commit" >&2
  # its own build, with its own Makefile; not the tree under test's objects
  make -s -C "$dir" build/luamcp >&2
fi
echo "$dir/build/luamcp"
