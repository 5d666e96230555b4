#!/usr/bin/env bash
# What does a DRM refresh cost? Generates a /proc of 1000 processes (3 to
# 39 fds each: ttys, sockets, pipes, eventfds, files; 21,011 in all), 20 of
# which hold DRM fds with real amdgpu fdinfo text (22 DRM fds: one a dup,
# one a client inherited from another of the 20), and the amdgpu /sys of
# tests/data/drm/amdgpu-dgpu; then times DrmSource::sample in a release
# build on that tree, wall and on-CPU: the first sample (every fd link of
# every process), the steady refresh at 1 s (list /proc, new PIDs, a fifth
# of the others' fd lists with the links of new fd numbers, the fdinfo of
# the known DRM fds) and the values alone. Also this machine's real /proc.
# Peers in the same run: reading the same 22 fdinfo files with cat (one
# cat, and a shell loop of cats), and finding the DRM fds with find -lname.
# Needs: hyperfine. Usage: scripts/bench_drm.sh [ROUNDS]
# GPUTASKMAN_DRM_BENCH_TREE=DIR keeps the generated tree in DIR (and reuses
# it when it is there).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-500}
if [[ -n ${GPUTASKMAN_DRM_BENCH_TREE:-} ]]; then
  work=$GPUTASKMAN_DRM_BENCH_TREE
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
proc=$work/proc
if [[ -f $work/files ]]; then
  echo "== reusing the tree in $work"
else
echo "== generating the tree in $work"
cp -a tests/data/drm/amdgpu-dgpu/sys "$work/sys"
fdinfo_text() {
  printf 'pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t%s\n' "$2"
  printf 'drm-driver:\tamdgpu\ndrm-client-id:\t%s\ndrm-pdev:\t0000:03:00.0\npasid:\t%s\n' "$1" "$((32768 + $1))"
  for r in cpu gtt vram; do
    printf 'drm-total-%s:\t%s KiB\ndrm-shared-%s:\t0\ndrm-active-%s:\t0\ndrm-resident-%s:\t%s KiB\ndrm-purgeable-%s:\t0\n' \
      $r $((4096 * $1)) $r $r $r $((4096 * $1)) $r
  done
  printf 'amd-evicted-vram:\t0\namd-requested-vram:\t%s KiB\namd-requested-gtt:\t8192 KiB\n' $((4096 * $1))
  printf 'drm-engine-gfx:\t%s ns\ndrm-engine-compute:\t0 ns\ndrm-engine-dma:\t1000 ns\n' $((1000000 * $1))
}
drm_files=()
for pid in $(seq 1 1000); do
  mkdir -p "$proc/$pid/fd" "$proc/$pid/fdinfo"
  n=$((3 + (pid * 7) % 37))
  for fd in $(seq 0 $((n - 1))); do
    case $((fd % 5)) in
      0) t=/dev/pts/0 ;; 1) t="socket:[$((pid * 100 + fd))]" ;; 2) t="pipe:[$((pid * 100 + fd))]" ;;
      3) t='anon_inode:[eventfd]' ;; *) t=/usr/lib/x86_64-linux-gnu/libc.so.6 ;;
    esac
    ln -s "$t" "$proc/$pid/fd/$fd"
  done
  if ((pid % 50 == 0)); then
    fd=$n
    ln -s /dev/dri/renderD128 "$proc/$pid/fd/$fd"
    fdinfo_text "$pid" "$fd" > "$proc/$pid/fdinfo/$fd"
    drm_files+=("$proc/$pid/fdinfo/$fd")
    if ((pid == 500)); then # a dup of the same client
      ln -s /dev/dri/renderD128 "$proc/$pid/fd/$((fd + 1))"
      fdinfo_text "$pid" "$fd" > "$proc/$pid/fdinfo/$((fd + 1))"
      drm_files+=("$proc/$pid/fdinfo/$((fd + 1))")
    fi
  fi
done
# PID 1000's client, inherited by PID 950 (a holder of its own client too).
n=$((3 + (950 * 7) % 37 + 1))
ln -s /dev/dri/renderD128 "$proc/950/fd/$n"
cp "$proc/1000/fdinfo/$((3 + (1000 * 7) % 37))" "$proc/950/fdinfo/$n"
drm_files+=("$proc/950/fdinfo/$n")
echo "processes: $(ls "$proc" | wc -l), fds: $(find "$proc" -path '*/fd/*' | wc -l), DRM fds: ${#drm_files[@]} in $(find "$proc" -path '*/fd/*' -lname '/dev/dri/*' -printf '%h\n' | sort -u | wc -l) processes"
printf '%s\n' "${drm_files[@]}" > "$work/files"
fi

echo "== gputaskman DrmSource::sample (release), $rounds refreshes"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
GPUTASKMAN_DRM_BENCH_ROOT=$work GPUTASKMAN_DRM_BENCH_ROUNDS=$rounds GPUTASKMAN_DRM_BENCH_REAL_PROC=1 \
  cargo test --release --quiet --bin gputaskman collect::drm::bench::bench_drm_scan -- --ignored --nocapture \
  | grep '^BENCH'
echo "real /proc here: $(ls -d /proc/[0-9]* | wc -l) processes"

echo "== peers (hyperfine; each includes starting the process; User + System is the CPU cost)"
hyperfine -N --warmup 20 --runs 200 --export-markdown "$work/cat.md" \
  -n "cat of the 22 fdinfo files (one process)" "xargs -a $work/files cat"
hyperfine -N --warmup 3 --runs 30 --export-markdown "$work/find.md" \
  -n "find the DRM fds of 1000 processes (find -lname)" "find $proc -path '*/fd/*' -lname '/dev/dri/*'"
hyperfine --warmup 5 --runs 50 --export-markdown "$work/loop.md" \
  -n "shell loop: cat each fdinfo file" "while read -r f; do cat \"\$f\"; done < $work/files > /dev/null"
cat "$work/cat.md" "$work/find.md" "$work/loop.md"
