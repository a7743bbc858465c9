#!/bin/sh
# deps.sh build|test|bench - install the Debian packages a step needs, if any
# are missing. Safe to run again: it only calls apt-get when something is
# absent. Uses sudo when not root.
set -eu

# libyaml-dev: SKILL.md front matter; zlib1g-dev: the .mcpb's deflate (both
# linked statically).
# libcurl4-openssl-dev: curl's headers (mcp.http loads libcurl4 at run time).
# dpkg-dev and libc-ares-dev: the libcurl build/luamcp-static links in,
# built from Debian's curl source package with c-ares as its resolver
# (runtime/tools/cross/static-deps.sh, which adds a deb-src entry).
# libhiredis-dev: --redis (mcp.store, the bus), with its libuv adapter,
# linked statically.
# libsqlite3-dev: mcp.sqlite (linked statically).
# libwslay-dev: WebSocket framing (os/wslay.h; libwslay1 is loaded at run
# time, as libcurl is: Debian ships no static libwslay).
# lua-busted: the test framework `luamcp test` runs, so that it works after
# `make` alone (it is Lua: nothing links it); with lua5.4 and lua-luv,
# plain `busted spec/FILE_spec.lua` too (README "Tests"). lua5.4 in the
# same install also keeps lua-busted from pulling in lua5.2 for `lua`.
build_pkgs="gcc make libc6-dev liblua5.4-dev lua-cjson-dev libuv1-dev libhttp-parser-dev libssl-dev libcurl4-openssl-dev libc-ares-dev dpkg-dev libyaml-dev zlib1g-dev libhiredis-dev libsqlite3-dev libwslay-dev lua5.4 lua-luv lua-busted"
# openssl and tinyproxy: the HTTPS origin's test CA and the proxy of
# spec/http_client_spec.lua; lua-sql-sqlite3: scripts/sqlite; git:
# scripts/toolbox's spec; groff-base and man-db: the manual page's spec
# (groff's warnings, man -l); bsdutils: script(1), a terminal for the
# colour and trace specs; redis-server: spec/redis_spec.lua and
# spec/scaleout_spec.lua; prometheus: the scraper of spec/metrics_spec.lua;
# nginx-light: the load balancer in front of
# spec/scaleout_spec.lua and bench/scale.sh; lua-penlight and
# lua-filesystem: the pure-Lua module and the C module of
# spec/second_week_deps_spec.lua (luamcp build carries one, refuses the other);
# valgrind: spec/client_spec.lua runs luamcp call under it (a new machine
# here has it; a minimal Debian does not);
# curl, python3 (its zipfile) and file: spec/build_spec.lua and
# spec/cross_build_spec.lua check what luamcp build writes with them (a
# minimal Debian has none of them);
# jq: the README's OAuth recipe reads the token with it (spec/readme_spec.lua
# runs the recipe);
# skopeo, umoci and podman: spec/release_oci_spec.lua reads luamcp
# release's OCI image with skopeo, unpacks it with umoci and runs it in a
# chroot (util-linux's unshare), and in podman where containers can run;
# chromium: spec/ui_spec.lua drives the inspector page (luamcp dev --ui) in
# it, headless, through puppeteer-core (spec/package.json);
# lua5.2: spec/busted_lua_spec.lua runs busted with a `lua` that is 5.2
# first on PATH (what /usr/bin/lua is on a machine where lua-busted
# brought lua5.2 in: every busted run must be Lua 5.4 all the same);
# chromium: spec/websocket_spec.lua's page speaks MCP through the browser's
# own WebSocket (headless, driven over the DevTools protocol).
test_pkgs="lua5.4 lua5.2 lua-penlight lua-filesystem lua-busted lua-luv lua-cjson unzip ca-certificates clang libclang-rt-14-dev json-schema-test-suite
           valgrind curl jq python3 file openssl tinyproxy lua-sql-sqlite3 git groff-base man-db bsdutils redis-server nginx-light prometheus
           skopeo umoci podman chromium"
bench_pkgs="wrk"

case "${1:-build}" in
  build) want="$build_pkgs" ;;
  test) want="$build_pkgs $test_pkgs" ;;
  bench) want="$build_pkgs $test_pkgs $bench_pkgs" ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
# npm is only needed for the test tools (official SDK, conformance suite,
# Node 22); use the machine's npm if it has one.
if [ "${1:-build}" != build ] && ! command -v npm >/dev/null 2>&1; then want="$want npm"; fi

missing=""
for p in $want; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0

echo "Installing missing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
  echo "deps.sh: need root or sudo to install:$missing" >&2; exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# One apt at a time: make test builds the cross targets side by side, and
# each installs what it lacks (runtime/tools/cross/*-deps.sh take the same lock).
lock="${TMPDIR:-/tmp}/luamcp-apt.lock"
$sudo flock "$lock" apt-get update -qq
# shellcheck disable=SC2086
$sudo flock "$lock" apt-get install -y -qq --no-install-recommends $missing >/dev/null
