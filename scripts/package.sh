#!/usr/bin/env bash
# The release artifacts (README: Install): the Debian package and the static
# musl binary. Needs cargo-deb, musl-tools and the rustup target
# x86_64-unknown-linux-musl (.ci/run installs them).
#   target/debian/gputaskman_*.deb
#   target/x86_64-unknown-linux-musl/release/gputaskman
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')

echo "== release build (glibc)"
cargo build --release --locked --bin gputaskman
bin=$target/release/gputaskman

# The man page and completions come from the binary's own clap definition
# (src/install_files.rs); cargo-deb takes them from here, a path relative
# to the package (Cargo.toml), wherever the target directory is.
assets=target/assets
mkdir -p "$assets"
"$bin" manpage | gzip -9n >"$assets/gputaskman.1.gz"
"$bin" completions bash >"$assets/gputaskman.bash"
"$bin" completions zsh >"$assets/_gputaskman"
"$bin" completions fish >"$assets/gputaskman.fish"

echo "== cargo deb"
cargo deb --no-build --locked

# Static: no glibc at all, so it runs whatever the machine's libc version.
# zstd's C code is compiled with Debian's musl-gcc.
echo "== release build (x86_64-unknown-linux-musl, static)"
cargo build --release --locked --bin gputaskman --target x86_64-unknown-linux-musl
