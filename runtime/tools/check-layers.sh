#!/usr/bin/env bash
# check-layers.sh [-v] [RUNTIME_DIR [OBJ_DIR]] - the tree is the architecture:
# check that every file under runtime/ includes only what its layer may, that
# the includes between modules (x.c and x.h count as one) have no cycle, and
# that the calls between modules, drawn from the objects the build made
# (OBJ_DIR, default build/obj beside RUNTIME_DIR), follow the layers and form
# no loop between concerns beyond the ones tools/call-loops.txt lists (-v:
# one call per step of every loop, not only of a new one).
#
#   os/         os/ only: the platform seams (runtime/os/README)
#   core/       core/ and os/, and never Lua, libuv or http_parser
#   transport/  os/, core/ and transport/
#   app/        os/, core/ and app/
#   cli/        everything
#
# Prints one line per file that breaks a rule and ends with
# "N passed, N failed" (one check per file, plus one for include cycles, one
# for the objects, one for calls across layers, one for call loops). Called
# by `make test` after the build; spec/layers_spec.lua proves it fails on a
# bad tree.
set -uo pipefail
explain=0
if [ "${1:-}" = -v ]; then explain=1; shift; fi
tools=$(cd "$(dirname "$0")" && pwd)
root=${1:-"$tools/.."}
objdir=${2:-"$root/../build/obj"}
objdir=$(cd "$objdir" 2>/dev/null && pwd) || objdir=${2:-"$root/../build/obj"}
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
symbols=$(mktemp)
calls=$(mktemp)
trap 'rm -f "$edges" "$symbols" "$calls"' EXIT

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

# ---- Calls ----------------------------------------------------------------
# Which module names which, drawn from the code as compiled: the global
# symbols each object defines and the ones it leaves to others (a call or a
# function's address taken by name, the same dependency). An include says
# what a file may see; this says what it uses, including what a shared
# private header (transport/http.h, app/app.h) lets files use of each other.
objects_ok=1
objects=()
while IFS= read -r file; do
  layer=${file%%/*}
  obj="$objdir/${file%.c}.o"
  if [ ! -f "$obj" ]; then
    # os/ holds one file per platform; only this platform's are built.
    [ "$layer" = os ] && continue
    echo "$file: no object $obj to read its calls from (run make first)"; objects_ok=0; continue
  fi
  if [ "$file" -nt "$obj" ]; then
    echo "$file: newer than $obj, whose calls would be stale (run make first)"; objects_ok=0; continue
  fi
  objects+=("$obj")
done < <(find os core transport app cli -maxdepth 1 -name '*.c' | LC_ALL=C sort)
# "D MODULE SYMBOL" for each global symbol an object defines, then
# "U MODULE SYMBOL" for each it leaves to others (nm -A: "OBJECT:... SYMBOL").
# shellcheck disable=SC2016 # an awk program: its $1 is awk's
module_of='{ m = substr($1, length(dir) + 2); sub(/\.o:.*/, "", m); print kind, m, $NF }'
if [ "$objects_ok" = 1 ]; then
  if ! nm -A -g --defined-only "${objects[@]}" | awk -v dir="$objdir" -v kind=D "NF == 3 $module_of" >"$symbols" ||
     ! nm -A -u "${objects[@]}" | awk -v dir="$objdir" -v kind=U "$module_of" >>"$symbols"; then
    echo "nm could not read the objects in $objdir (binutils)"; objects_ok=0
  fi
fi
if [ "$objects_ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

if [ "$objects_ok" = 1 ]; then
  # "FROM TO SYMBOL": one line per pair of modules, with the first symbol
  # (in sort order) that FROM names of TO, to show why.
  awk '$1 == "D" { def[$3] = $2 }
       $1 == "U" && ($3 in def) && def[$3] != $2 { print $2, def[$3], $3 }' \
    "$symbols" | LC_ALL=C sort | awk '!seen[$1 " " $2]++' >"$calls"

  # A call goes where an include may: down, or within the layer.
  ok=1
  while read -r from to symbol; do
    if [ "${from%%/*}" != "${to%%/*}" ] && ! allowed "${from%%/*}" "${to%%/*}"; then
      echo "$from.c calls $symbol in $to.c: ${from%%/*}/ may not call into ${to%%/*}/ (layers: os <- core <- transport, app <- cli)"; ok=0
    fi
  done <"$calls"
  if [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

  # Loops: modules of one layer that reach each other through calls (a
  # strongly connected component), counted between concerns. A concern is one
  # module, or the modules tools/call-loops.txt names as one ("concern"
  # lines); a loop it lists ("loop" lines) was there when this check began
  # and may shrink or go, never grow, and no new one may appear.
  if awk -v explain="$explain" -f "$tools/call-loops.awk" tools/call-loops.txt "$calls"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
fi

echo "layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
