#!/usr/bin/env bash
# The portable Windows artifact (README: Windows): the stripped release .exe
# for x86-64 Windows 10 and later, the licence and the README, zipped, with
# its SHA-256 beside it. Needs Debian's gcc-mingw-w64-x86-64 (the linker,
# and zstd's C) and `rustup target add x86_64-pc-windows-gnu`.
#   target/gputaskman-VERSION-windows-x64.zip
#   target/gputaskman-VERSION-windows-x64.zip.sha256
set -euo pipefail
cd "$(dirname "$0")/.."
triple=x86_64-pc-windows-gnu
meta=$(cargo metadata --format-version 1 --no-deps)
target=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$meta")
version=$(python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "gputaskman"))' <<<"$meta")

echo "== release build ($triple)"
cargo build --release --locked --bin gputaskman --target "$triple"
exe=$target/$triple/release/gputaskman.exe
# The release profile strips; the check keeps a changed profile from
# shipping a 100 MB .exe unnoticed.
if x86_64-w64-mingw32-objdump -h "$exe" | grep -q '\.debug_info'; then
  echo "error: $exe has debug info (the release profile should strip it)" >&2
  exit 1
fi

name=gputaskman-$version-windows-x64
stage=$target/$name
rm -rf "$stage" "$target/$name.zip"
mkdir -p "$stage"
cp "$exe" "$stage/gputaskman.exe"
cp README.md "$stage/README.md"
# The licence the package declares (Cargo.toml: MIT OR Apache-2.0).
printf 'gputaskman %s is licensed under MIT OR Apache-2.0, at your option.\n' "$version" >"$stage/LICENSE.txt"
(cd "$target" && zip -q -X -r "$name.zip" "$name")
(cd "$target" && sha256sum "$name.zip" >"$name.zip.sha256")
echo "== $target/$name.zip"
cat "$target/$name.zip.sha256"
