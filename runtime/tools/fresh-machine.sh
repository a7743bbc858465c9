#!/usr/bin/env bash
# fresh-machine.sh - build and test the committed tree (HEAD) on a new
# Debian 12 machine, as a developer or CI would get one: nothing installed
# beforehand, no ../shared beside the clone. `make fresh-machine-test` runs it.
#
# Why: the project's own files must install everything it needs (make calls
# runtime/tools/deps.sh, which uses apt-get). On this machine those packages
# are already there, so a missing install step does not show. A chroot into
# a minimal bookworm root (debootstrap --variant=minbase: no gcc, no make,
# no git, no ca-certificates) shows it.
#
# What it does, as root:
#   1. installs debootstrap on the host if missing, and makes the pristine
#      root once: CACHE/bookworm-minbase, CACHE being
#      ${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/fresh-root. It is kept and
#      reused, and no run writes to it: each run copies it (cp -a) to a
#      scratch root CACHE/run.XXXXXX. The pristine root gets what a Debian 12
#      machine has and debootstrap leaves out: /etc/hosts (localhost) and the
#      sources of bookworm-updates and bookworm-security.
#   2. clones this repository's HEAD commit (the committed tree, not the
#      working tree) on the host into the scratch root's /root/luamcp.
#   3. mounts /proc, /sys, /dev, /dev/pts, and a /dev/shm of its own into
#      the scratch root, copies in /etc/resolv.conf (for apt), and forbids
#      starting services there (/usr/sbin/policy-rc.d: the redis-server and
#      nginx packages would otherwise start daemons that hold the root).
#   4. in the chroot: apt-get install make (and nothing else), then
#      `make`, `make run </dev/null` (the example server on stdio must exit
#      0 at EOF; 60 s bound), and `make test`.
#   5. on exit, even on failure or ^C: kills what is left running in the
#      root, unmounts everything under it (deepest first; umount -l when
#      busy), and deletes the scratch root.
#
# Logs go to build/fresh-machine/ in this repository (outside the scratch
# root): setup.log (debootstrap, apt, make, make run) and make-test.log; the
# tail of make-test.log (the summary) is printed at the end. Exits with make
# test's status (or make run's, if that failed and make test passed).
#
# Environment:
#   FRESH_KEEP=1         keep the scratch root afterwards, for inspection
#                        (chroot CACHE/run.XXXXXX, after mounting what step 3 does)
#   FRESH_REUSE_CACHE=1  start with the user cache (/root/.cache/luamcp) that
#                        the last run left (each run saves it in
#                        CACHE/user-cache): a fresh clone on a warm cache
#   FRESH_NO_TEST=1      stop after `make run` (the build check alone)
#   FRESH_MIRROR         the Debian mirror (default http://deb.debian.org/debian)
#
# Note: the chroot shares the host's network namespace (its tests bind
# loopback ports beside the host's) and the kernel's binfmt_misc (qemu's
# aarch64 registration made by make test inside stays on the host).
# The cleanup functions run from the EXIT trap; lists of pids and mount
# points are split on purpose.
# shellcheck disable=SC2317,SC2086
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/fresh-root
pristine=$cache/bookworm-minbase
user_cache=$cache/user-cache
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
logdir=$repo/build/fresh-machine
setup_log=$logdir/setup.log
test_log=$logdir/make-test.log
chroot_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf '== fresh-machine: %s\n' "$*" | tee -a "$setup_log" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || { echo "fresh-machine.sh: needs root (debootstrap, mount, chroot)" >&2; exit 1; }
mkdir -p "$logdir" "$cache"
: >"$setup_log"
head=$(git -C "$repo" rev-parse HEAD)
say "HEAD $head ($(git -C "$repo" log -1 --format=%s "$head" | cut -c1-70))"
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  say "the working tree has uncommitted changes: they are not tested (HEAD is)"
fi

# ---- 1. The pristine root --------------------------------------------------
if [ ! -x "$pristine/bin/sh" ]; then
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    apt-get update -qq >>"$setup_log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >>"$setup_log" 2>&1
  fi
  say "debootstrap --variant=minbase bookworm into $pristine (a few minutes)"
  rm -rf --one-file-system "$pristine.partial"
  t0=$(date +%s)
  debootstrap --variant=minbase bookworm "$pristine.partial" "$mirror" >>"$setup_log" 2>&1 ||
    die "debootstrap failed (see $setup_log)"
  # What a Debian 12 machine has beside the base system: localhost, and
  # the updates and security suites.
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$pristine.partial/etc/hosts"
  security=${mirror%/debian}/debian-security
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    echo "deb $security bookworm-security main"
  } >"$pristine.partial/etc/apt/sources.list"
  mv "$pristine.partial" "$pristine"
  say "debootstrap took $(($(date +%s) - t0)) s; the pristine root is $(du -shx "$pristine" | cut -f1)"
fi

# ---- 2. The scratch root and the clone ------------------------------------
scratch=$(mktemp -d "$cache/run.XXXXXX")
root=$scratch

# Processes whose root is the scratch root (left by a step, or a daemon).
root_pids() {
  local d
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/root" 2>/dev/null)" = "$root" ] && echo "${d#/proc/}"
  done
  return 0
}
# Mount points at or under the scratch root, deepest first (mountinfo's
# 5th field; those made inside the chroot too, such as binfmt_misc).
root_mounts() {
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
  local rc=$? pids m left
  set +e
  trap - EXIT INT TERM
  pids=$(root_pids)
  if [ -n "$pids" ]; then
    say "stopping what is left in the root:" $pids
    kill -TERM $pids 2>/dev/null; sleep 2
    pids=$(root_pids); [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  fi
  if [ -d "$root/root/.cache/luamcp" ]; then
    rm -rf --one-file-system "$user_cache"
    cp -a "$root/root/.cache/luamcp" "$user_cache" && say "saved the user cache in $user_cache (FRESH_REUSE_CACHE=1 reuses it)"
  fi
  for m in $(root_mounts); do
    umount "$m" 2>/dev/null || umount -l "$m" || say "could not unmount $m"
  done
  left=$(root_mounts)
  if [ -n "$left" ]; then
    say "still mounted, so $scratch is left as it is:" $left
  elif [ "${FRESH_KEEP:-}" = 1 ]; then
    say "kept the scratch root $scratch ($(du -shx "$scratch" 2>/dev/null | cut -f1))"
  else
    rm -rf --one-file-system "$scratch"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "copying the pristine root to $scratch"
cp -a "$pristine/." "$root/"
[ ! -e "$root/root/shared" ] || die "$root/root/shared exists: the clone must have no ../shared"
git clone -q --no-hardlinks "$repo" "$root/root/luamcp"
git -C "$root/root/luamcp" reset -q --hard "$head"
if [ "${FRESH_REUSE_CACHE:-}" = 1 ]; then
  if [ -d "$user_cache" ]; then
    mkdir -p "$root/root/.cache"
    cp -a "$user_cache" "$root/root/.cache/luamcp"
    say "starting with the saved user cache ($(du -shx "$user_cache" | cut -f1))"
  else
    say "FRESH_REUSE_CACHE=1 but no run has saved a user cache yet: starting cold"
  fi
fi

# ---- 3. Mounts, resolv.conf, no services ----------------------------------
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
# /dev and /dev/pts are the host's (script(1) and the terminal specs need
# ptys); /dev/shm is a tmpfs of the root's own, so that shared memory does
# not mix with the host's.
mount --bind /dev "$root/dev"
mount --make-slave "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
mount -t tmpfs -o nosuid,nodev,mode=1777 shm "$root/dev/shm"
rm -f "$root/etc/resolv.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The rest of this machine's way out to the registries, which a new machine
# here comes with: the local CA certificates (a TLS-inspecting egress proxy
# signs the npm registry's certificate with one; the ca-certificates package,
# which make test installs, adds them to the system bundle) and npm's own
# settings that name that bundle. The CA variables of the environment are
# passed in by in_root.
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
[ ! -f /etc/npmrc ] || cp /etc/npmrc "$root/etc/npmrc"
printf '#!/bin/sh\n# fresh-machine.sh: no daemons are started in this chroot.\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

# in_root COMMAND: runs COMMAND with bash in the chroot, in /root/luamcp,
# with a login's plain environment. In the background and waited for, so
# that ^C or a TERM runs the trap at once (bash defers a trap until a
# foreground child ends, and drops it when the child exits on its own);
# the cleanup then stops what runs in the root.
ca_env=$(env | grep -E '^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|CURL_CA_BUNDLE|GIT_SSL_CAINFO)=' | tr '\n' ' ')
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
    PATH="$chroot_path" LANG=C.UTF-8 ${TERM:+TERM="$TERM"} $ca_env \
    /bin/bash -c "cd /root/luamcp && $1" &
  wait $!
}

# ---- 4. make, make run, make test -----------------------------------------
say "in the chroot: apt-get install make"
in_root 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make' \
  >>"$setup_log" 2>&1 || die "apt-get install make failed (see $setup_log)"
say "in the chroot: make (installs the build packages, builds build/luamcp)"
t0=$(date +%s)
in_root make >>"$setup_log" 2>&1 || die "make failed after $(($(date +%s) - t0)) s (see $setup_log)"
say "make took $(($(date +%s) - t0)) s; /usr/bin/lua -> $(in_root '[ -e /usr/bin/lua ] && readlink -f /usr/bin/lua || echo none')"
say "in the chroot: make run </dev/null"
run_status=0
in_root 'timeout 60 make run </dev/null' >>"$setup_log" 2>&1 || run_status=$?
case $run_status in
  0) say "make run exited 0 at the end of its input" ;;
  124) say "make run did not exit within 60 s of the end of its input" ;;
  *) say "make run exited $run_status (see $setup_log)" ;;
esac
say "the scratch root is $(du -shx "$scratch" | cut -f1) after make"

if [ "${FRESH_NO_TEST:-}" = 1 ]; then
  say "FRESH_NO_TEST=1: make test not run"
  exit "$run_status"
fi
say "in the chroot: make test (about 30 minutes; tail -f $test_log)"
t0=$(date +%s)
test_status=0
in_root 'make test' >"$test_log" 2>&1 || test_status=$?
say "make test exited $test_status after $(($(date +%s) - t0)) s; the root is $(du -shx "$scratch" | cut -f1)"
tail -n 60 "$test_log"
[ "$test_status" -ne 0 ] && exit "$test_status"
exit "$run_status"
