#!/usr/bin/env bash
# Cargo's runner for x86_64-pc-windows-gnu (CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER):
# runs a Windows test binary under Wine, in the Wine tests' prefix, with the
# ProcessPrng stub beside it (Wine 8.0 has no bcryptprimitives.dll:
# tests/windows/bcryptprimitives.c says why). .ci/run uses it for
# `cargo test --target x86_64-pc-windows-gnu --lib`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
exe="$1"
stub="$(dirname "$exe")/bcryptprimitives.dll"
if [ ! -e "$stub" ] || [ "$here/bcryptprimitives.c" -nt "$stub" ]; then
  x86_64-w64-mingw32-gcc -O2 -shared -o "$stub" "$here/bcryptprimitives.c" -ladvapi32
fi
export WINEPREFIX="${WINEPREFIX:-$root/target/wine/prefix}" WINEDEBUG=-all
if [ ! -e "$WINEPREFIX/system.reg" ]; then
  mkdir -p "$WINEPREFIX"
  timeout 300 wineboot -i
fi
exec wine "$@"
