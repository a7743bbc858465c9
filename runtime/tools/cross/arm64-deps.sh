#!/bin/sh
# arm64-deps.sh DEPS_DIR - what `make linux-arm64` needs, installed if
# missing (safe to run again: apt-get runs only when something is absent):
# Debian's aarch64 cross compiler and C library, the :arm64 (multiarch)
# -dev packages of the libraries luamcp links statically (libc-ares-dev:
# c-ares, the resolver of the libcurl linked in: static-deps.sh), and
# qemu-user-static to run the result here (runtime/tools/cross/qemu-binfmt.sh).
#
# libhttp-parser-dev is not Multi-Arch: same, so installing its :arm64
# package would remove the amd64 one the native build needs. Its arm64
# archive is downloaded instead and unpacked into DEPS_DIR (its
# usr/lib/aarch64-linux-gnu/libhttp_parser.a and usr/include).
set -eu

deps_dir=${1:?usage: $0 DEPS_DIR}
cross_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static"
arm64_pkgs="liblua5.4-dev lua-cjson-dev libuv1-dev libssl-dev libyaml-dev zlib1g-dev libhiredis-dev libcurl4-openssl-dev libc-ares-dev libsqlite3-dev"

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else sudo="need-root"; fi
as_root() {
  if [ "$sudo" = need-root ]; then echo "arm64-deps.sh: need root or sudo to run: $*" >&2; exit 1; fi
  $sudo "$@"
}
export DEBIAN_FRONTEND=noninteractive
# One apt at a time (runtime/tools/deps.sh takes the same lock).
lock="${TMPDIR:-/tmp}/luamcp-apt.lock"
updated=""
apt_update() {
  [ -n "$updated" ] && return 0
  as_root flock "$lock" apt-get update -qq
  updated=yes
}

# The arm64 architecture, for the :arm64 packages.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "arm64-deps.sh: adding the arm64 architecture to dpkg" >&2
  as_root flock "$lock" dpkg --add-architecture arm64
  apt_update
fi

missing=""
for p in $cross_pkgs $(for q in $arm64_pkgs; do echo "$q:arm64"; done); do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
if [ -n "$missing" ]; then
  echo "arm64-deps.sh: installing missing Debian packages:$missing" >&2
  apt_update
  # --no-remove: fail rather than let apt remove a native package to make
  # room for an :arm64 one (the native build must keep working).
  # shellcheck disable=SC2086
  as_root flock "$lock" apt-get install -y -qq --no-install-recommends --no-remove $missing >/dev/null
fi

# http_parser for arm64, unpacked beside the build (never installed). The
# archive is kept in the user's cache folder, named by its version, so a
# later clone on this machine unpacks it without a download (removing the
# cache is always safe: it is downloaded again).
if [ ! -f "$deps_dir/usr/lib/aarch64-linux-gnu/libhttp_parser.a" ]; then
  echo "arm64-deps.sh: unpacking libhttp-parser-dev:arm64 into $deps_dir" >&2
  mkdir -p "$deps_dir"
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/arm64-deps
  version=$(apt-cache policy libhttp-parser-dev:arm64 2>/dev/null | sed -n 's/^ *Candidate: *//p' | tr ':' '%')
  cached="$cache/libhttp-parser-dev_${version:-unknown}_arm64.deb"
  if [ -z "$version" ] || [ "$version" = "(none)" ] || [ ! -s "$cached" ]; then
    download=$(mktemp -d)
    # apt-get download as root warns that _apt cannot write here: let it.
    chmod 777 "$download"
    if ! (cd "$download" && apt-get download -qq libhttp-parser-dev:arm64 2>/dev/null); then
      apt_update
      (cd "$download" && apt-get download -qq libhttp-parser-dev:arm64)
    fi
    version=$(dpkg-deb -f "$download"/libhttp-parser-dev_*_arm64.deb Version | tr ':' '%')
    cached="$cache/libhttp-parser-dev_${version}_arm64.deb"
    mkdir -p "$cache" && cp "$download"/libhttp-parser-dev_*_arm64.deb "$cached.tmp" && mv "$cached.tmp" "$cached" ||
      cached="$(echo "$download"/libhttp-parser-dev_*_arm64.deb)"
  fi
  dpkg -x "$cached" "$deps_dir"
  rm -rf "${download:-}"
fi
