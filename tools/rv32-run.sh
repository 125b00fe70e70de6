#!/bin/bash
# Build a C project strata wrote (`strata compile ... -o DIR`, --target host
# or pulp, with a harness) for a 32-bit RISC-V core (rv32imafc, ilp32f: the
# PULP cores' ISA with the F extension) with picolibc, and run it bare metal
# on QEMU's `virt` machine; the console and the results file go through
# semihosting.
#
#   tools/rv32-run.sh DIR      writes DIR/train.rv32 and DIR/results.bin
#
# Exit status: the harness's (0 exactly when every loss and trained tensor is
# within the fixture's tolerance); 125 when the toolchain or QEMU is missing
# (Debian: gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc;
# tools/install-rv32.sh installs them).
set -u
[ $# -eq 1 ] || { sed -n 2,14p "$0"; exit 2; }
for t in riscv64-unknown-elf-gcc qemu-system-riscv32; do
    command -v "$t" >/dev/null || { echo "rv32-run: $t not found" >&2; exit 125; }
done
dir=$(realpath "$1")
cd "$dir" || exit 2
[ -f harness.c ] || { echo "rv32-run: $dir has no harness.c" >&2; exit 2; }
srcs=$(sed -n 's/^SRCS = //p' Makefile)
target_flags=$(sed -n 's/^TARGET_FLAGS = //p' Makefile)
case $dir in *,*) echo "rv32-run: a comma in $dir cannot pass QEMU's options" >&2; exit 2 ;; esac
# 16 MiB of flash for code and constants, 112 MiB of RAM for the arenas.
# shellcheck disable=SC2086
riscv64-unknown-elf-gcc -std=c99 -O2 -Wall -Wextra -Werror $target_flags \
    -march=rv32imafc -mabi=ilp32f --specs=picolibc.specs --oslib=semihost --crt0=semihost \
    -Wl,--defsym=__flash=0x80000000 -Wl,--defsym=__flash_size=0x01000000 \
    -Wl,--defsym=__ram=0x81000000 -Wl,--defsym=__ram_size=0x07000000 \
    -Wl,--defsym=__stack_size=0x100000 \
    -o train.rv32 $srcs -lm || exit 2
# picolibc's semihosting start-up takes argv[1..] from QEMU's `arg=`: the
# harness's one argument, where it writes its raw results. The console goes
# to stdout through a chardev (QEMU's default semihosting console is the
# terminal, not a pipe).
timeout 900 qemu-system-riscv32 -machine virt -m 128M -display none -serial none \
    -monitor none -bios none -chardev stdio,id=console \
    -semihosting-config "enable=on,target=native,chardev=console,arg=$dir/results.bin" \
    -kernel train.rv32 </dev/null
