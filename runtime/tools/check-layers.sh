#!/usr/bin/env bash
# check-layers.sh [RUNTIME_DIR] - the tree is the architecture: check that
# every file under runtime/ includes only what its layer may, and that the
# includes between modules (x.c and x.h count as one) have no cycle.
#
#   os/         os/ only: the platform seams (runtime/os/README)
#   core/       core/ and os/, and never Lua, libuv or http_parser
#   transport/  os/, core/ and transport/
#   app/        os/, core/ and app/
#   cli/        everything
#
# Prints one line per file that breaks a rule and ends with
# "N passed, N failed" (one check per file, plus one for cycles). Called by
# `make test`; spec/layers_spec.lua proves it fails on a bad tree.
set -uo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root" || exit 2

allowed() { # allowed FROM_LAYER TO_LAYER
  case "$1:$2" in
    os:os | core:os | core:core | transport:os | transport:core | transport:transport | app:os | app:core | app:app | cli:*) return 0 ;;
    *) return 1 ;;
  esac
}

passed=0
failed=0
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT

while IFS= read -r file; do
  layer=${file%%/*}
  module=${file%.*}
  ok=1
  # Quoted includes name their layer: #include "core/json.h". Files in a
  # tests/ or fuzz/ folder may include a neighbour by its bare name.
  while IFS= read -r inc; do
    case "$inc" in
      */*) ;;
      *) [ -f "$(dirname "$file")/$inc" ] && continue
         echo "$file: #include \"$inc\" does not name its layer (write \"core/$inc\" or the like)"; ok=0; continue ;;
    esac
    to=${inc%%/*}
    if [ ! -f "$inc" ]; then
      echo "$file: #include \"$inc\": no such file under runtime/"; ok=0; continue
    fi
    if ! allowed "$layer" "$to"; then
      echo "$file: $layer/ may not include $inc (layers: os <- core <- transport, app <- cli)"; ok=0
    fi
    target=${inc%.*}
    [ "$target" != "$module" ] && echo "$module $target" >>"$edges"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
  if [ "$layer" = core ]; then
    bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(uv|uv/[^>]*|lua|lauxlib|lualib|luaconf|http_parser)\.h>' "$file")
    if [ -n "$bad" ]; then
      echo "$file: the core may not use Lua, libuv or http_parser: $bad"; ok=0
    fi
  fi
  if [ "$layer" = os ]; then
    bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(lua|lauxlib|lualib|luaconf)\.h>' "$file")
    if [ -n "$bad" ]; then
      echo "$file: the platform seams may not use Lua: $bad"; ok=0
    fi
  fi
  if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done < <(find os core transport app cli -name '*.[ch]' | LC_ALL=C sort)

# tsort reports a cycle as "input contains a loop" followed by its members.
if cycle=$(tsort "$edges" 2>&1 >/dev/null) && [ -z "$cycle" ]; then
  passed=$((passed + 1))
else
  echo "include cycle between modules:"
  echo "$cycle" | sed -n 's/^tsort: //p' | grep -v 'input contains a loop' | sed 's/^/  /'
  failed=$((failed + 1))
fi
echo "layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
