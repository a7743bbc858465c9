#!/usr/bin/env bash
# seams_windows.sh LIBUV_PREFIX - build runtime/os/tests/test_seams_windows.c
# (and test_path.c) with mingw-w64 against a Windows libuv (LIBUV_PREFIX/include/uv.h and
# LIBUV_PREFIX/lib/libuv_a.a: the Windows build's dependencies), and run it
# under wine, sending it SIGINT (which wine turns into Ctrl+C) once it
# waits for a console event. Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../../.."
prefix=${1:?usage: seams_windows.sh LIBUV_PREFIX}
out=build/os-tests
mkdir -p "$out"
wine=$(command -v wine || command -v wine64 || echo /usr/lib/wine/wine64)
# os/wslay.h's types: libwslay's header, which make windows copies beside the deps (the Windows build has no libwslay).
if ! x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -O1 -Iruntime -I"$prefix/include" -I"$prefix/../wslay-include" -static \
     -o "$out/test_seams_windows.exe" runtime/os/tests/test_seams_windows.c runtime/os/*_windows.c \
     "$prefix/lib/libuv_a.a" -lbcrypt -lcrypt32 -lws2_32 -liphlpapi -luserenv -ldbghelp -lole32 -luuid -lpsapi -lshell32; then
  echo "0 passed, 1 failed"; exit 1
fi
export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-$PWD/build/wineprefix}
log="$out/test_seams_windows.log"
# timeout passes our SIGINT on to wine, and kills a test that hangs (an
# interruption or a console event that never comes): a failure, not a
# stopped run.
timeout -s KILL 300 "$wine" "$out/test_seams_windows.exe" wait-signal >"$log" 2>&1 &
runner=$!
# Wine becomes the .exe's Unix process (same pid): SIGINT, passed on by
# timeout, goes to it.
for _ in $(seq 1 600); do
  grep -q 'waiting for Ctrl+C' "$log" 2>/dev/null && break
  kill -0 "$runner" 2>/dev/null || break
  sleep 0.1
done
kill -INT "$runner" 2>/dev/null
wait "$runner"
rc=$?
grep -v '^\s*$' "$log" | grep -E '^(ok|FAIL|    )' || cat "$log"
seams=$(grep -oE '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
[ -n "$seams" ] || seams="0 passed, 1 failed"
[ "$rc" -eq 0 ] || [ "${seams#* passed, }" != "0 failed" ] || seams="${seams%% *} passed, 1 failed"

# os/path.h's own unit test (runtime/os/tests/test_path.c), built for
# Windows: path_windows.c's real paths, links, program search and names.
paths="0 passed, 1 failed"
if x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -Iruntime -o "$out/test_path.exe" \
     runtime/os/tests/test_path.c runtime/os/path_windows.c; then
  (cd "$out" && timeout -s KILL 300 "$wine" test_path.exe) >"$out/test_path.log" 2>&1
  prc=$?
  grep -E '^(not ok|FAIL)' "$out/test_path.log"
  paths=$(grep -oE '^[0-9]+ passed, [0-9]+ failed' "$out/test_path.log" | tail -n 1)
  [ -n "$paths" ] || { cat "$out/test_path.log"; paths="0 passed, 1 failed"; }
  [ "$prc" -eq 0 ] || [ "${paths#* passed, }" != "0 failed" ] || paths="${paths%% *} passed, 1 failed"
fi
# os_sign_pem's unit test (runtime/os/tests/test_sign.c): crypt32 and CNG.
signs="0 passed, 1 failed"
if x86_64-w64-mingw32-gcc -std=c11 -Wall -Wextra -Iruntime -o "$out/test_sign.exe" \
     runtime/os/tests/test_sign.c runtime/os/crypto_windows.c -lbcrypt -lcrypt32; then
  (cd "$out" && timeout -s KILL 300 "$wine" test_sign.exe) >"$out/test_sign.log" 2>&1
  src=$?
  grep -E '^FAIL' "$out/test_sign.log"
  signs=$(grep -oE '^[0-9]+ passed, [0-9]+ failed' "$out/test_sign.log" | tail -n 1)
  [ -n "$signs" ] || { cat "$out/test_sign.log"; signs="0 passed, 1 failed"; }
  [ "$src" -eq 0 ] || [ "${signs#* passed, }" != "0 failed" ] || signs="${signs%% *} passed, 1 failed"
fi
echo "os seams: $seams; os/path: $paths; os_sign_pem: $signs"
p=$(( ${seams%% *} + ${paths%% *} + ${signs%% *} ))
f1=${seams#* passed, }; f2=${paths#* passed, }; f3=${signs#* passed, }
f=$(( ${f1%% *} + ${f2%% *} + ${f3%% *} ))
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
