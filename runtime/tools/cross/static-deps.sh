#!/bin/sh
# static-deps.sh ARCH OUT - libcurl for the fully static runtimes
# (build/luamcp-static for x86-64, build/linux-arm64/luamcp for arm64;
# issue #43), built from Debian 12's own source package of curl with the
# compiler for ARCH (x86-64: gcc; arm64: aarch64-linux-gnu-gcc). A static
# program cannot load libcurl at run time as build/luamcp does, so these
# link it in, as the Windows .exe does (runtime/tools/cross/windows-deps.sh).
#
# Only what mcp.http and the client need: http and https, TLS by Debian's
# OpenSSL (libssl.a of libssl-dev, or of libssl-dev:arm64), zlib, and
# c-ares to resolve host names (libcares.a of libc-ares-dev: glibc's static
# getaddrinfo would need glibc's NSS shared libraries at run time, and
# fails on a system without them, such as Alpine); every other protocol and
# optional library off, and no compiled-in CA location (app/curl_lib.c
# looks for the system's CA certificates itself, on whichever Linux it
# runs). Installs what it needs (dpkg-dev, libc-ares-dev[:arm64]; the
# deb-src entry as windows-deps.sh adds it) and puts into OUT:
#
#   OUT/deps/include/curl   curl's headers
#   OUT/deps/lib/libcurl.a
#   OUT/deps/stamp-all      it is all there (what make waits for)
#
# Built once per machine, not per clone: in the user's cache folder
# (${XDG_CACHE_HOME:-~/.cache}/luamcp/static-deps/KEY/deps), keyed by ARCH,
# curl's exact source package version, the compiler's version, the
# versions of the -dev packages it builds against and this script's own
# text; OUT/deps is a copy. Removing the cache is always safe.
set -eu

arch=${1:?usage: $0 x86-64|arm64 OUT}
out=${2:?usage: $0 x86-64|arm64 OUT}
case "$arch" in
  x86-64) host=x86_64-linux-gnu; cc=gcc; dpkg_arch=amd64; host_flag="" ;;
  arm64) host=aarch64-linux-gnu; cc=aarch64-linux-gnu-gcc; dpkg_arch=arm64; host_flag="--host=$host" ;;
  *) echo "usage: $0 x86-64|arm64 OUT" >&2; exit 2 ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)

say() { echo "static-deps ($arch): $*" >&2; }
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# One apt at a time (runtime/tools/deps.sh takes the same lock).
lock="${TMPDIR:-/tmp}/luamcp-apt.lock"

# ---- Debian packages and the deb-src entry ---------------------------------

# The native -dev packages come from runtime/tools/deps.sh, the :arm64 ones
# and the cross compiler from arm64-deps.sh; here only what is new.
pkgs="dpkg-dev make libc-ares-dev:$dpkg_arch libssl-dev:$dpkg_arch zlib1g-dev:$dpkg_arch"
missing=""
for p in $pkgs; do
  case "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
  esac
done
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
  # --no-remove: never let apt remove a native package for an :arm64 one.
  # shellcheck disable=SC2086
  $sudo flock "$lock" apt-get install -y -qq --no-install-recommends --no-remove $missing >/dev/null
fi

# ---- The cache --------------------------------------------------------------

key_input() {
  cat "$0"
  echo "$arch"
  "$cc" --version | head -n 1
  dpkg-query -W "libc-ares-dev:$dpkg_arch" "libssl-dev:$dpkg_arch" "zlib1g-dev:$dpkg_arch" 2>/dev/null
  flock "$lock" apt-get source --print-uris --only-source curl 2>/dev/null | awk '$2 ~ /\.dsc$/ { print $2 }'
}
key=$(key_input | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/static-deps
mkdir -p "$out"
out_abs=$(cd "$out" && pwd)

publish() {
  rm -rf "$out_abs/deps.new"
  cp -a "$1" "$out_abs/deps.new"
  rm -rf "$out_abs/deps"
  mv "$out_abs/deps.new" "$out_abs/deps"
  touch "$out_abs/deps/stamp-all" # newer than this script: make is done with it
}
if [ -f "$cache/$key/deps/stamp-all" ]; then
  say "using the libcurl built before, from $cache/$key"
  publish "$cache/$key/deps"
  exit 0
fi
# Built beside the cache entry and moved in whole: a build stopped half-way
# is never taken for a cached one.
if mkdir -p "$cache" 2>/dev/null && work="$cache/$key.build.$$" && mkdir "$work" 2>/dev/null; then
  trap 'rm -rf "$work"' EXIT
else
  work="$out_abs/work"; rm -rf "$work"; mkdir -p "$work"
fi
say "building libcurl (key $key) in $work"
mkdir -p "$work/src" "$work/obj" "$work/deps"
(cd "$work/src" && flock "$lock" apt-get source -qq --only-source curl >/dev/null 2>&1) || {
  say "apt-get source curl failed (is there a deb-src entry for Debian 12?)"; exit 1; }
d=$(find "$work/src" -maxdepth 1 -type d -name "curl-[0-9]*" | head -n 1)
[ -x "$d/configure" ] || (cd "$d" && autoreconf -fi >/dev/null)

# pkg-config answers for ARCH's libraries (libcares, zlib, OpenSSL); the
# static link's extra libraries (-lpthread -ldl) for configure's tests.
(cd "$work/obj" && PKG_CONFIG_LIBDIR="/usr/lib/$host/pkgconfig:/usr/share/pkgconfig" \
  "$d/configure" -q $host_flag CC="$cc" --prefix="$work/deps" \
   --disable-shared --enable-static --with-openssl --with-zlib --enable-ares \
   --without-libpsl --without-brotli --without-zstd --without-nghttp2 --without-nghttp3 --without-ngtcp2 \
   --without-libidn2 --without-librtmp --without-libssh2 --without-libssh --without-libgsasl --without-gssapi \
   --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp --disable-pop3 \
   --disable-imap --disable-smtp --disable-gopher --disable-mqtt --disable-smb --disable-ftp --disable-file \
   --disable-manual --disable-ntlm-wb --disable-netrc --without-ca-bundle --without-ca-path --without-ca-fallback \
   >/dev/null)
# make's own jobserver is the Makefile's, which called this script: these
# makes run on their own.
unset MAKEFLAGS MFLAGS MAKELEVEL
make -C "$work/obj/lib" -j"$jobs" -s >/dev/null
make -C "$work/obj/lib" -s install >/dev/null
make -C "$work/obj/include" -s install >/dev/null
rm -rf "$work/deps/lib/pkgconfig" "$work/deps/lib/libcurl.la"

touch "$work/deps/stamp-all"
if [ "$work" != "$out_abs/work" ]; then
  rm -rf "${cache:?}/$key"
  mkdir -p "$cache/$key"
  mv "$work/deps" "$cache/$key/deps"
  rm -rf "$work"
  publish "$cache/$key/deps"
  say "cached in $cache/$key"
else
  publish "$work/deps"
  rm -rf "$work"
fi
