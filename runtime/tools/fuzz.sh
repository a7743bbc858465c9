#!/usr/bin/env bash
# fuzz.sh [SECONDS [TARGET...]] - build fuzz targets with libFuzzer, ASan and
# UBSan and run each for SECONDS (default 10), from its corpus in
# build/fuzz (kept between runs), its seeds beside it (fuzz/seeds_NAME/,
# with a dictionary fuzz/fuzz_NAME.dict where there is one) and, for the
# JSON parsers, the JSONTestSuite in ../shared (read there, never copied).
# With no TARGET,
# every target. Prints, per target, its executions and coverage (libFuzzer's
# "cov" edges and "ft" features), then "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10}
shift || true
SHARED=${SHARED:-../shared}
out=build/fuzz
mkdir -p "$out"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -Iruntime -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# Each target lives beside the layer it tests: runtime/LAYER/fuzz/fuzz_NAME.c.
c=runtime/core
t=runtime/transport
o=runtime/os
# The whole core, as the Makefile's unit tests link it (a hand-kept list
# fell behind when the core grew jobs.c), with the platform seams it calls
# (the Makefile's OS_CORE_SRC: randomness and hashes, the executable's
# path, the log's stderr and whether it is a terminal) and the Makefile's CORE_LIBS: libcrypto under those seams for the
# sealed requestState and task ids, zlib for ZIP.
libdir=/usr/lib/$(gcc -print-multiarch)
# Compiled once into build/fuzz/libcore.a (instrumented, not linked with
# libFuzzer's main), which the targets that take the whole core link last:
# CORE in a target's list below.
core_src=$(ls $c/*.c $o/crypto_posix.c $o/self_linux.c $o/stderr_posix.c $o/terminal_posix.c)
core_link="$out/libcore.a $libdir/libcrypto.a $libdir/libz.a -ldl -lpthread"
core=CORE
declare -A sources=(
  [json]="$core"
  [fast_paths]="$c/buf.c $c/json.c $c/base64.c"
  [fast_paths_words]="-DJSON_SCAN_WORDS $c/buf.c $c/json.c $c/base64.c"
  [session]="$core"
  [http_util]="$t/http_util.c $c/unix_url.c"
  [regex]="$c/regex.c"
  [schema]="$c/buf.c $c/json.c $c/schema.c $c/regex.c"
  [bundle]="$core"
  [jwt]="$core"
  [sse_reader]="$c/sse_reader.c $c/buf.c"
  [trace]="$c/trace.c $c/buf.c $o/crypto_posix.c $libdir/libcrypto.a -ldl -lpthread"
  [http]="$core $(ls $t/http_*.c $t/worker_ipc.c | tr '\n' ' ') $o/sock_posix.c $o/wslay_posix.c $o/dynlib_posix.c $t/fuzz/fuzz_app.c -luv -lhttp_parser -ldl"
  [ws]="$core $(ls $t/http_*.c $t/worker_ipc.c | tr '\n' ' ') $o/sock_posix.c $o/wslay_posix.c $o/dynlib_posix.c $t/fuzz/fuzz_app.c -luv -lhttp_parser -ldl"
  [stdio]="$core $t/stdio_transport.c $o/stdfds_posix.c $t/fuzz/fuzz_app.c -luv"
  [lua_json]="-DLJSON_BORROW_BYTES=2 -DLJSON_RADIX_KEYS=2 -DLJSON_STASH_KEYS=1 $c/buf.c $c/json.c $c/chain.c runtime/app/lua_json.c -I/usr/include/lua5.4 -llua5.4"
  [lua_pattern]="runtime/app/lua_pattern.c -I/usr/include/lua5.4 -llua5.4"
)
all="json fast_paths fast_paths_words session http_util regex schema bundle jwt sse_reader trace http ws stdio lua_json lua_pattern"
targets=${*:-$all}
passed=0
failed=0
# The targets are built once per machine for the same sources: kept in the
# user's cache folder, keyed by this script, the compiler and every file of
# runtime/ (any change builds anew; removing the cache is always safe).
key=$({ cat "$0"; clang --version | head -n 1; find runtime -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort | xargs cat; } |
  sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/fuzz/$key
core_built=""
build_core() {
  [ -z "$core_built" ] || return 0
  rm -rf "$out/core-obj" "$out/libcore.a"
  mkdir -p "$out/core-obj"
  # shellcheck disable=SC2016,SC2086 # expanded by the inner shell
  if ! printf '%s\n' $core_src | xargs -P "$(nproc)" -I{} sh -c \
       'exec clang $1 -c "$2" -o "$3/$(echo "$2" | tr / _).o"' sh "${CFLAGS/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" {} "$out/core-obj" \
       2>"$out/core.build.log" || ! ar rcs "$out/libcore.a" "$out"/core-obj/*.o; then
    echo "the core does not build for fuzzing"; cat "$out/core.build.log"
    echo "0 passed, 1 failed"
    exit 1
  fi
  core_built=yes
}
for target in $targets; do
  src=$(ls runtime/*/fuzz/fuzz_$target.c 2>/dev/null)
  if [ -z "$src" ] || [ -z "${sources[$target]:-}" ]; then
    echo "fuzz_$target: no such target (targets: $all)"; failed=$((failed + 1)); continue
  fi
  files=${sources[$target]}
  if [ -x "$cache/fuzz_$target" ]; then
    cp "$cache/fuzz_$target" "$out/fuzz_$target"
  else
    case " $files " in *" CORE "*) build_core; files="${files/CORE/} $core_link" ;; esac
    if ! clang $CFLAGS -o "$out/fuzz_$target" "$src" $files -lm 2>"$out/$target.build.log"; then
      echo "fuzz_$target: does not build"; cat "$out/$target.build.log"; failed=$((failed + 1)); continue
    fi
    mkdir -p "$cache" 2>/dev/null && cp "$out/fuzz_$target" "$cache/fuzz_$target.$$" 2>/dev/null &&
      mv "$cache/fuzz_$target.$$" "$cache/fuzz_$target"
  fi
  corpus="$out/corpus_$target"
  mkdir -p "$corpus"
  seeds=()
  case $target in
    json|fast_paths|fast_paths_words|session|lua_json) seeds=("$SHARED/JSONTestSuite/test_parsing") ;;
  esac
  # A fresh clone has no ../shared: start from the target's own corpus only.
  if [ ${#seeds[@]} -gt 0 ] && [ ! -d "${seeds[0]}" ]; then
    echo "fuzz_$target: no seed corpus at ${seeds[0]}; starting without it"
    seeds=()
  fi
  dir=$(dirname "$src")
  [ -d "$dir/seeds_$target" ] && seeds+=("$dir/seeds_$target")
  dict=()
  [ -f "$dir/fuzz_$target.dict" ] && dict=("-dict=$dir/fuzz_$target.dict")
  if "$out/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 "${dict[@]}" \
       -artifact_prefix="$out/$target-" "$corpus" "${seeds[@]}" >"$out/$target.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$target.log" | grep -o '[0-9]*$')
    cov=$(grep -E '^#[0-9]+' "$out/$target.log" | tail -n 1 | grep -o 'cov: [0-9]* ft: [0-9]*')
    echo "fuzz_$target: ${runs:-?} runs in ${seconds}s, ${cov:-cov ?}, corpus $(ls "$corpus" | wc -l) inputs, no crash"
    passed=$((passed + 1))
  else
    echo "fuzz_$target: FOUND A PROBLEM (see $out/$target.log and $out/$target-*)"
    grep -A20 'ERROR\|==ERROR\|runtime error\|deadly signal' "$out/$target.log" | head -n 40
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
