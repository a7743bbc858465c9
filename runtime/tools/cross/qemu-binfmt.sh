#!/bin/sh
# qemu-binfmt.sh [BINARY] - make aarch64 programs run here, through
# qemu-user-static and the kernel's binfmt_misc: mounts binfmt_misc if it
# is not, and registers /usr/bin/qemu-aarch64-static for aarch64 ELF files
# unless a handler that works is there already. The F flag opens the
# interpreter now, so it also serves programs started where that path does
# not exist (a chroot, a container). With a handler, luamcp's children
# (mcp.exec starts each through /proc/self/exe, which qemu resolves to the
# aarch64 binary) run too; `qemu-aarch64-static luamcp` alone would not.
#
# Exits 0 when BINARY (build/linux-arm64/luamcp by default) runs
# `--version`; otherwise prints why not (no root, no binfmt_misc) and
# exits 1, for the caller to skip what needs it.
set -u

binary=${1:-build/linux-arm64/luamcp}
qemu=/usr/bin/qemu-aarch64-static
mnt=/proc/sys/fs/binfmt_misc
name="qemu-aarch64"
# An aarch64 ELF executable (Debian's /usr/lib/binfmt.d/qemu-aarch64.conf).
magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'

runs() { "$binary" --version >/dev/null 2>&1; }

if [ ! -x "$qemu" ]; then
  echo "qemu-binfmt.sh: $qemu is missing (Debian package qemu-user-static)"
  exit 1
fi
if [ ! -x "$binary" ]; then
  echo "qemu-binfmt.sh: $binary is missing (make linux-arm64)"
  exit 1
fi
runs && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
  echo "qemu-binfmt.sh: aarch64 programs do not run here, and registering qemu with binfmt_misc needs root"
  exit 1
fi
if [ ! -f "$mnt/register" ] && ! $sudo mount -t binfmt_misc binfmt_misc "$mnt" 2>/dev/null; then
  echo "qemu-binfmt.sh: binfmt_misc is not mounted at $mnt and could not be (a container without the privilege?)"
  exit 1
fi
# A handler that is there but does not run the binary (disabled, or an
# interpreter path missing here) is replaced by ours.
if [ -f "$mnt/$name" ]; then
  echo -1 | $sudo tee "$mnt/$name" >/dev/null 2>&1
fi
if ! printf ':%s:M::%s:%s:%s:F' "$name" "$magic" "$mask" "$qemu" | $sudo tee "$mnt/register" >/dev/null 2>&1; then
  echo "qemu-binfmt.sh: could not register $qemu in $mnt/register"
  exit 1
fi
if ! runs; then
  echo "qemu-binfmt.sh: $binary still does not run with $qemu registered ($(tr '\n' ' ' <"$mnt/$name" 2>/dev/null))"
  exit 1
fi
echo "qemu-binfmt.sh: registered $qemu for aarch64 programs (binfmt_misc, flags F)"
