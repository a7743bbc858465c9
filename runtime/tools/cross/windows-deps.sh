#!/bin/sh
# windows-deps.sh OUT - the libraries build/windows/luamcp.exe links, built
# from Debian 12's own source packages with Debian's mingw-w64 cross
# compiler (make windows calls it; issue #28). Installs what it needs
# (mingw-w64, wine, dpkg-dev, libz-mingw-w64-dev), adds a deb-src entry
# when the machine has none, and puts into OUT (build/windows):
#
#   OUT/deps/include, OUT/deps/lib static libraries and their headers
#   OUT/deps/stamp-all             every one is there (what make windows waits for)
#
# They are built once per machine, not per clone: in the user's cache folder
# (${XDG_CACHE_HOME:-~/.cache}/luamcp/windows-deps/KEY/deps), keyed by the
# exact source package versions apt-get source would fetch, the cross
# compiler's version and this script's own text; OUT/deps is a copy. A
# changed key builds anew; removing the cache is always safe (the next run
# builds again). While building, KEY.build.PID holds:
#
#   src/<package>-<version>/   the unpacked Debian sources (apt-get source)
#   obj-deps/                  the objects
#   deps/stamp-<package>       one per library built
#
# Lua, lua-cjson, libuv, http-parser, libyaml and hiredis are a handful of
# C files each: compiled here file by file (no configure step, nothing to
# guess).
# libcurl goes through its own configure, with Schannel (the OS's TLS) and
# every optional library off, so the .exe needs only Windows system DLLs,
# and Windows' own threads for its resolver (no winpthread to link).
# SQLite's Debian source is its source tree: its one-file amalgamation is
# generated there (natively: gcc and tclsh) and compiled like the others.
set -eu

out=${1:-build/windows}
host=x86_64-w64-mingw32
cc="$host-gcc-win32"
ar="$host-ar"
jobs=$(nproc 2>/dev/null || echo 2)

say() { echo "windows-deps: $*" >&2; }
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# One apt at a time (runtime/tools/deps.sh takes the same lock).
lock="${TMPDIR:-/tmp}/luamcp-apt.lock"

# ---- Debian packages and the deb-src entry ---------------------------------

pkgs="mingw-w64 gcc-mingw-w64-x86-64-win32 wine wine64 dpkg-dev libz-mingw-w64-dev make gcc tcl"
missing=""
for p in $pkgs; do
  case "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
  esac
done

# apt-get source needs a deb-src line for Debian 12's main archive. The
# machine may already have one (its own sources, or another cross build's);
# otherwise add ours, signed by Debian's archive keyring like the deb lines.
src_list=/etc/apt/sources.list.d/luamcp-src.sources
has_deb_src() {
  grep -rqsE '^(Types:.*deb-src|deb-src .*deb\.debian\.org/debian/? bookworm)' \
    /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}
updated=""
if ! has_deb_src; then
  say "adding $src_list (deb-src for Debian 12)"
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm bookworm-updates' \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $sudo tee "$src_list" >/dev/null
  $sudo flock "$lock" apt-get update -qq
  updated=1
fi
if [ -n "$missing" ]; then
  say "installing$missing"
  [ -n "$updated" ] || $sudo flock "$lock" apt-get update -qq
  # shellcheck disable=SC2086
  $sudo flock "$lock" apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# ---- The cache --------------------------------------------------------------

libraries="lua5.4 lua-cjson libuv1 http-parser libyaml hiredis curl sqlite3"
# What the built libraries depend on: this script, the compiler, the
# mingw-w64 headers and zlib they build against, and the source packages'
# exact versions (the .dsc names apt-get source would fetch).
compat=$(cd "$(dirname "$0")/posix-sockets" && pwd)
key_input() {
  cat "$0"
  find "$compat" -type f | sort | xargs cat
  "$cc" --version | head -n 1
  dpkg-query -W mingw-w64-x86-64-dev libz-mingw-w64-dev 2>/dev/null
  for p in $libraries; do
    flock "$lock" apt-get source --print-uris --only-source "$p" 2>/dev/null | awk '$2 ~ /\.dsc$/ { print $2 }'
  done
}
key=$(key_input | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/windows-deps
mkdir -p "$out"
out_abs=$(cd "$out" && pwd)

# publish DIR: OUT/deps becomes a copy of DIR (a complete deps folder).
publish() {
  rm -rf "$out_abs/deps.new"
  cp -a "$1" "$out_abs/deps.new"
  rm -rf "$out_abs/deps"
  mv "$out_abs/deps.new" "$out_abs/deps"
  touch "$out_abs/deps/stamp-all" # newer than this script: make is done with it
}
if [ -f "$cache/$key/deps/stamp-all" ]; then
  say "using the libraries built before, from $cache/$key"
  publish "$cache/$key/deps"
  exit 0
fi
# Build in a folder of our own beside the cache entry (or, when the cache
# folder cannot be written, in OUT as before), then move it in whole: a
# build stopped half-way is never taken for a cached one.
if mkdir -p "$cache" 2>/dev/null && work="$cache/$key.build.$$" && mkdir "$work" 2>/dev/null; then
  trap 'rm -rf "$work"' EXIT
else
  work=$out_abs
fi
say "building the Windows libraries (key $key) in $work"
src="$work/src"
deps="$work/deps"
mkdir -p "$src" "$deps/include" "$deps/lib"
deps_abs="$deps"

# fetch PACKAGE: unpack Debian's source of PACKAGE (its patches applied)
# under OUT/src once; prints the directory.
fetch() {
  dir=$(find "$src" -maxdepth 1 -type d -name "$1-[0-9]*" | head -n 1)
  if [ -z "$dir" ]; then
    (cd "$src" && flock "$lock" apt-get source -qq --only-source "$1" >/dev/null 2>&1) || {
      say "apt-get source $1 failed (is there a deb-src entry for Debian 12?)"; exit 1; }
    dir=$(find "$src" -maxdepth 1 -type d -name "$1-[0-9]*" | head -n 1)
  fi
  echo "$dir"
}

# objects LIB DIR FLAGS -- FILES: compile FILES (relative to DIR) into
# OUT/deps/lib/LIB.
objects() {
  lib=$1; dir=$2; shift 2
  flags=""
  while [ "$1" != "--" ]; do flags="$flags $1"; shift; done
  shift
  obj="$work/obj-deps/$lib"
  rm -rf "$obj"; mkdir -p "$obj"
  # Compiled two (nproc) at a time; a/b.c becomes a_b.c.o.
  # shellcheck disable=SC2016
  printf "%s\n" "$@" | (cd "$dir" && xargs -P "$jobs" -I{} sh -c \
    'exec "$1" -O2 $2 -c "$3" -o "$4/$(echo "$3" | tr / _).o"' sh "$cc" "$flags" {} "$obj")
  rm -f "$deps_abs/lib/$lib"
  $ar rcs "$deps_abs/lib/$lib" "$obj"/*.o
}

stamp() { [ -f "$deps/stamp-$1" ]; }
done_stamp() { touch "$deps/stamp-$1"; say "$1 built"; }

# ---- Lua 5.4 ---------------------------------------------------------------
if ! stamp lua5.4; then
  d=$(fetch lua5.4)
  files=$(cd "$d/src" && ls -- *.c | grep -v -x -e lua.c -e luac.c)
  # shellcheck disable=SC2086
  objects liblua5.4.a "$d/src" -DLUA_COMPAT_5_3 -- $files
  mkdir -p "$deps/include/lua5.4"
  cp "$d/src/lua.h" "$d/src/luaconf.h" "$d/src/lualib.h" "$d/src/lauxlib.h" "$d/src/lua.hpp" "$deps/include/lua5.4/"
  done_stamp lua5.4
fi

# ---- lua-cjson -------------------------------------------------------------
if ! stamp lua-cjson; then
  d=$(fetch lua-cjson)
  objects liblua5.4-cjson.a "$d" -I"$deps_abs/include/lua5.4" -- lua_cjson.c strbuf.c fpconv.c
  done_stamp lua-cjson
fi

# ---- libuv -----------------------------------------------------------------
if ! stamp libuv1; then
  d=$(fetch libuv1)
  files=$(cd "$d" && ls src/*.c src/win/*.c)
  # shellcheck disable=SC2086
  objects libuv_a.a "$d" -Iinclude -Isrc -DWIN32_LEAN_AND_MEAN -D_WIN32_WINNT=0x0602 -- $files
  cp -r "$d/include/." "$deps/include/"
  done_stamp libuv1
fi

# ---- http-parser -----------------------------------------------------------
if ! stamp http-parser; then
  d=$(fetch http-parser)
  objects libhttp_parser.a "$d" -- http_parser.c
  cp "$d/http_parser.h" "$deps/include/"
  done_stamp http-parser
fi

# ---- libyaml ---------------------------------------------------------------
if ! stamp libyaml; then
  d=$(fetch libyaml)
  v=${d##*/libyaml-}; v=${v%%[+-]*} # the upstream version, from the folder: 0.2.5
  maj=${v%%.*}; rest=${v#*.}; min=${rest%%.*}; pat=${rest#*.}
  files=$(cd "$d" && ls src/*.c)
  # shellcheck disable=SC2086
  objects libyaml.a "$d" -Iinclude -DYAML_DECLARE_STATIC -DYAML_VERSION_MAJOR="$maj" -DYAML_VERSION_MINOR="$min" \
    -DYAML_VERSION_PATCH="$pat" -DYAML_VERSION_STRING="\"$v\"" -- $files
  cp "$d/include/yaml.h" "$deps/include/"
  done_stamp libyaml
fi

# ---- hiredis ----------------------------------------------------------------
# Debian 12's hiredis (0.14.1) knows POSIX sockets only: compiled with
# posix-sockets/ first on the include path and its posix_sockets.h in front
# of every file, its socket calls go to Winsock (see that header). The
# examples, the tests and the adapters are not built; app/redis.c watches
# the socket itself.
if ! stamp hiredis; then
  d=$(fetch hiredis)
  objects libhiredis.a "$d" -D_WIN32_WINNT=0x0602 -I"$compat" -include posix_sockets.h -- \
    alloc.c async.c hiredis.c net.c read.c sds.c
  mkdir -p "$deps/include/hiredis"
  cp "$d"/*.h "$deps/include/hiredis/"
  done_stamp hiredis
fi

# ---- libcurl (Schannel) ----------------------------------------------------
if ! stamp curl; then
  d=$(fetch curl)
  b="$work/obj-deps/curl"
  rm -rf "$b"; mkdir -p "$b"
  d_abs=$(cd "$d" && pwd)
  [ -x "$d_abs/configure" ] || (cd "$d_abs" && autoreconf -fi >/dev/null)
  (cd "$b" && "$d_abs/configure" -q --host=$host CC="$cc" --prefix="$deps_abs" \
     --disable-shared --enable-static --disable-pthreads --with-schannel --with-zlib=/usr/$host \
     --without-libpsl --without-brotli --without-zstd --without-nghttp2 --without-nghttp3 --without-ngtcp2 \
     --without-libidn2 --without-librtmp --without-libssh2 --without-libssh --without-libgsasl \
     --without-winidn --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
     --disable-tftp --disable-pop3 --disable-imap --disable-smtp --disable-gopher --disable-mqtt \
     --disable-smb --disable-manual --disable-ntlm-wb --without-ca-bundle --without-ca-path \
     >/dev/null)
  make -C "$b/lib" -j"$jobs" -s >/dev/null
  make -C "$b/lib" -s install >/dev/null
  make -C "$b/include" -s install >/dev/null
  done_stamp curl
fi

# ---- SQLite ------------------------------------------------------------------
# `make sqlite3.c` after SQLite's own configure (for this machine: it only
# writes C) joins the tree into sqlite3.c and sqlite3.h, the amalgamation
# SQLite recommends building from; that is compiled for Windows (its win32
# file layer, thread-safe as Debian's).
if ! stamp sqlite3; then
  d=$(fetch sqlite3)
  d_abs=$(cd "$d" && pwd)
  b="$work/obj-deps/sqlite3-amalgamation"
  rm -rf "$b"; mkdir -p "$b"
  (cd "$b" && "$d_abs/configure" -q >/dev/null && make -s sqlite3.c >/dev/null)
  objects libsqlite3.a "$b" -DSQLITE_THREADSAFE=1 -DSQLITE_OMIT_LOAD_EXTENSION -- sqlite3.c
  cp "$b/sqlite3.h" "$deps/include/"
  done_stamp sqlite3
fi

touch "$deps/stamp-all"
if [ "$work" != "$out_abs" ]; then
  rm -rf "$cache/$key"
  mkdir -p "$cache/$key"
  mv "$deps" "$cache/$key/deps"
  rm -rf "$work"
  publish "$cache/$key/deps"
  say "cached in $cache/$key"
fi
