#!/bin/sh
# Counts the kernel instructions behind uprobes' hit counts and calibrate's
# openCloseInstructions (docs/kernel-instruction-counts.md): boots a Debian
# cloud kernel in QEMU's TCG with -icount shift=0 (one guest instruction per
# nanosecond of guest time), one CPU, this host's LSMs, and runs
# kernel-instructions.c as init, then mmlab's trigger.
#
# Usage: kernel-instructions.sh SUITE PACKAGE
#   e.g. kernel-instructions.sh trixie-backports linux-image-6.18.15+deb13-cloud-amd64
#        kernel-instructions.sh trixie linux-image-6.12.117+deb13-cloud-amd64
# Needs: apt-get, dpkg-deb, cpio, gzip, gcc (static libc), go, qemu-system-x86_64.
# Works in a temporary directory, removed at the end.
set -eu
suite=$1 pkg=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
echo "deb [trusted=yes] http://deb.debian.org/debian $suite main" >"$w/sources.list"
mkdir -p "$w/lists/partial"
apt="-o Dir::Etc::sourcelist=$w/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$w/lists"
# shellcheck disable=SC2086
apt-get -q $apt update >/dev/null
# shellcheck disable=SC2086
(cd "$w" && apt-get -q $apt download "$pkg" >/dev/null 2>&1)
dpkg-deb -x "$w"/"$pkg"_*.deb "$w/k"
mkdir -p "$w/root/bin"
gcc -static -O2 -o "$w/root/init" "$here/kernel-instructions.c"
(cd "$repo" && CGO_ENABLED=0 go build -o "$w/root/bin/mmlab" ./cmd/mmlab)
echo "/bin/mmlab run trigger --target live --cpus 1 --cases nop,uprobe-nop,uretprobe-nop,uprobe-nop5 --attach uprobe_multi --warmup 500ms --duration 1s --interval 500ms" >"$w/root/args"
(cd "$w/root" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$w/initrd.gz")
qemu-system-x86_64 -machine q35 -cpu max -smp 1 -m 1024 -accel tcg -icount shift=0 \
	-nographic -no-reboot -kernel "$w"/k/boot/vmlinuz-* -initrd "$w/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 lsm=lockdown,capability,landlock,bpf" |
	tr -d '\r' | sed -n 's/.*counts:/counts:/p; /^live kernel/p; /^[a-z0-9-]* ( 1 cpus)/p'
