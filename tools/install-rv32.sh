#!/bin/bash
# Install what tools/rv32-run.sh needs, from Debian's packages: the RISC-V
# cross compiler, picolibc for it, and QEMU's RISC-V system emulators.
# Does nothing when they are already there.
set -u
if command -v riscv64-unknown-elf-gcc >/dev/null && command -v qemu-system-riscv32 >/dev/null \
    && [ -f /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends \
    gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf qemu-system-misc
