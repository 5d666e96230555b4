#!/usr/bin/env bash
# Checks what scripts/package.sh built, as a user would get it: installs the
# .deb with dpkg -i (root; this changes the machine: CI's is thrown away),
# runs the binary and the man page from where the package put them, starts
# the systemd unit's own command line as its user without systemd and
# scrapes it with the token, and runs the static binary where there is no
# libc at all.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
deb=$(ls "$target"/debian/gputaskman_*.deb)

echo "== dpkg -i $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
dpkg -i "$deb"
test "$(command -v gputaskman)" = /usr/bin/gputaskman
gputaskman --version
page=$(MANPAGER=cat MANWIDTH=80 man gputaskman)
grep -q 'completions' <<<"$page"
echo "man gputaskman: renders"
test -s /usr/share/doc/gputaskman/grafana/gputaskman.json
# The alerting rules, as Prometheus would load them from where they land.
promtool check rules /usr/share/doc/gputaskman/prometheus/gputaskman-alerts.yml
test -s /usr/share/bash-completion/completions/gputaskman
# Installed, never enabled or started by the package.
unit=/lib/systemd/system/gputaskman.service
[ -f "$unit" ] || unit=/usr/lib/systemd/system/gputaskman.service
test ! -e /etc/systemd/system/multi-user.target.wants/gputaskman.service
getent passwd gputaskman >/dev/null
test "$(stat -c '%U %a' /etc/gputaskman/token)" = "gputaskman 600"

echo "== the unit's ExecStart as its User, without systemd"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
user=$(sed -n 's/^User=//p' "$unit")
log=$(mktemp)
# The unit's own words, split as systemd splits a line without quotes.
read -r -a argv <<<"$exec_start"
setpriv --reuid="$user" --regid="$user" --init-groups -- "${argv[@]}" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
token=$(cat /etc/gputaskman/token)
for _ in $(seq 50); do
  curl -sf -o /dev/null -H "Authorization: Bearer $token" http://127.0.0.1:9464/healthz && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.1
done
metrics=$(curl -sf -H "Authorization: Bearer $token" http://127.0.0.1:9464/metrics) \
  || { echo "serve did not answer with the token:"; cat "$log"; exit 1; }
grep -q '^# TYPE gputaskman_' <<<"$metrics"
# Without the token: refused.
test "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9464/metrics)" = 401
kill "$pid"
wait "$pid" 2>/dev/null || true
trap - EXIT
if grep -q warning "$log"; then cat "$log"; exit 1; fi
echo "serve as $user: /metrics with the token, 401 without"

echo "== the static binary, in a root with nothing else in it"
musl=$target/x86_64-unknown-linux-musl/release/gputaskman
file "$musl" | grep -Eq 'static-pie linked|statically linked'
root=$(mktemp -d)
cp "$musl" "$root/gputaskman"
chroot "$root" /gputaskman --version
# Whole outputs, then grep: `| grep -q` stops reading at the first match.
script=$(chroot "$root" /gputaskman completions bash)
grep -q '_gputaskman()' <<<"$script"
# It says why NVML is out of its reach rather than blaming the driver.
gpus=$(chroot "$root" /gputaskman --list-gpus 2>&1)
grep -q 'this static build cannot load libnvidia-ml.so.1' <<<"$gpus"
rm -r "$root"
echo "musl: $(du -k "$musl" | cut -f1) KiB, runs without any libc on the machine"
