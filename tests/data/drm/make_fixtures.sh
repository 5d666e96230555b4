#!/usr/bin/env bash
# Writes the DRM fixture trees next to this script: each is a /proc and a
# /sys as a real machine lays them out (links where the kernel has links),
# with fdinfo and sysfs contents taken from real drivers' output and the
# kernel's Documentation/gpu/drm-usage-stats.rst (and the i915, xe,
# panfrost pages beside it). Rerun after editing; the result is committed,
# symlinks and all. Values the tests assert are commented where they are
# made.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf amdgpu-dgpu amdgpu-apu intel xe soc

# pci_dev TREE PARENT ADDR VENDOR DEVICE DRIVER: a PCI function under
# TREE/sys/devices/PARENT/ADDR bound to DRIVER; prints its directory.
pci_dev() {
  local tree=$1 parent=$2 addr=$3 vendor=$4 device=$5 driver=$6
  local dir=$tree/sys/devices/$parent/$addr
  mkdir -p "$dir" "$tree/sys/bus/pci/drivers/$driver" "$dir/power"
  printf '%s\n' "$vendor" > "$dir/vendor"
  printf '%s\n' "$device" > "$dir/device"
  printf '0x030000\n' > "$dir/class"
  printf 'active\n' > "$dir/power/runtime_status"
  ln -sr "$tree/sys/bus/pci/drivers/$driver" "$dir/driver"
  echo "$dir"
}

# node TREE DEVDIR NAME: /sys/class/drm/NAME for the device in DEVDIR.
node() {
  local tree=$1 dev=$2 name=$3
  mkdir -p "$dev/drm/$name" "$tree/sys/class/drm"
  ln -sr "$dev" "$dev/drm/$name/device"
  printf '226:%s\n' "${name//[!0-9]/}" > "$dev/drm/$name/dev"
  ln -sr "$dev/drm/$name" "$tree/sys/class/drm/$name"
}

# connector TREE DEVDIR CARD NAME: a connector, which is not a device.
connector() {
  local tree=$1 dev=$2 card=$3 name=$4
  mkdir -p "$dev/drm/$card/$card-$name"
  ln -sr "$dev/drm/$card/$card-$name" "$tree/sys/class/drm/$card-$name"
}

# fd TREE PID FD TARGET: /proc/PID/fd/FD -> TARGET (need not exist).
fd() {
  mkdir -p "$1/proc/$2/fd" "$1/proc/$2/fdinfo"
  ln -s "$4" "$1/proc/$2/fd/$3"
}

# fdinfo TREE PID FD: the fdinfo text from stdin, after the generic lines.
fdinfo() {
  { printf 'pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t%s\n' "$((1000 + $3))"; cat; } > "$1/proc/$2/fdinfo/$3"
}

w() { mkdir -p "$(dirname "$1")"; printf '%b\n' "$2" > "$1"; }

# meta TREE PID COMM ARGV...: the stat, status and cmdline the process
# scan reads, so a snapshot of the tree names the process; and /proc/stat.
meta() {
  local tree=$1 pid=$2 comm=$3; shift 3
  mkdir -p "$tree/proc/$pid"
  printf '%s (%s) S 1 %s %s 0 -1 4194560 1000 0 0 0 500 100 0 0 20 0 8 0 123456 8589934592 262144 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0\n' \
    "$pid" "$comm" "$pid" "$pid" > "$tree/proc/$pid/stat"
  printf 'Name:\t%s\nState:\tS (sleeping)\nTgid:\t%s\nPid:\t%s\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n' \
    "$comm" "$pid" "$pid" > "$tree/proc/$pid/status"
  printf '%s\0' "$@" > "$tree/proc/$pid/cmdline"
  [[ -f $tree/proc/stat ]] || printf 'cpu  1 0 1 100 0 0 0 0 0 0\nbtime 1764500000\n' > "$tree/proc/stat"
}

###########################################################################
# amdgpu-dgpu: a Radeon RX 7900 XTX (Navi 31) behind its internal switch.
t=amdgpu-dgpu
d=$(pci_dev $t pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0 0000:03:00.0 0x1002 0x744c amdgpu)
node $t "$d" card0; node $t "$d" renderD128; connector $t "$d" card0 DP-1
printf '1.1\n' > $t/sys/class/drm/version
w $d/mem_info_vram_total 25753026560        # 24560 MiB
w $d/mem_info_vram_used 6442450944          # 6 GiB
w $d/mem_info_vis_vram_total 25753026560    # resizable BAR: all visible
w $d/mem_info_vis_vram_used 6442450944
w $d/mem_info_gtt_total 17179869184         # 16 GiB
w $d/mem_info_gtt_used 536870912            # 512 MiB
w $d/mem_info_vram_vendor samsung
w $d/gpu_busy_percent 37
w $d/mem_busy_percent 12
w $d/pp_dpm_sclk '0: 500Mhz\n1: 1840Mhz *\n2: 2526Mhz'
w $d/pp_dpm_mclk '0: 96Mhz\n1: 456Mhz\n2: 772Mhz\n3: 1250Mhz *'
w $d/current_link_speed '16.0 GT/s PCIe'
w $d/current_link_width 16
w $d/max_link_speed '16.0 GT/s PCIe'
w $d/max_link_width 16
h=$d/hwmon/hwmon2
w $h/name amdgpu
w $h/temp1_input 45000; w $h/temp1_label edge
w $h/temp2_input 52000; w $h/temp2_label junction
w $h/temp3_input 60000; w $h/temp3_label mem
w $h/power1_average 87000000                # 87 W
w $h/power1_cap 327000000                   # 327 W
w $h/freq1_input 1838000000; w $h/freq1_label sclk
w $h/freq2_input 1250000000; w $h/freq2_label mclk
w $h/pwm1 77; w $h/pwm1_max 255             # 30%
w $h/temp1_crit 100000; w $h/temp1_emergency 105000   # edge: critical 100 °C, shutdown 105 °C
w $h/temp2_crit 110000; w $h/temp2_emergency 115000
w $h/power1_cap_default 327000000; w $h/power1_cap_min 294000000; w $h/power1_cap_max 360000000
# gpu_metrics: the SMU's table, struct gpu_metrics_v1_3 (kernel
# drivers/gpu/drm/amd/include/kgd_pp_interface.h; 120 bytes, C alignment),
# as smu_v13_0_0 fills it: fields it does not give left 0xff.., the
# ASIC-independent throttle status (byte 112) 0: nothing holds it down.
python3 - "$d/gpu_metrics" <<'PY'
import struct, sys
table = struct.pack('<HBB6H3HHQQ7H7HIHHHHII4HQ3HHQ',
    120, 1, 3,
    45, 52, 60, 0xffff, 0xffff, 0xffff,   # edge, hotspot, mem, VRs (°C)
    37, 12, 0,                            # gfx, umc, mm activity (%)
    87, 0xffffffffffffffff,               # socket power (W), energy: not given
    123456789000,                         # system clock counter (ns)
    1838, 0xffff, 1250, 0xffff, 0xffff, 0xffff, 0xffff,  # average clocks (MHz)
    1840, 0xffff, 1250, 0xffff, 0xffff, 0xffff, 0xffff,  # current clocks
    0,                                    # throttle_status (chip-specific)
    1200, 16, 160, 0,                     # fan (RPM), PCIe x16 at 16.0 GT/s, padding
    0xffffffff, 0xffffffff,               # activity accumulators
    0xffff, 0xffff, 0xffff, 0xffff,       # HBM temperatures: GDDR6 has none
    0xffffffffffffffff,                   # firmware timestamp
    0xffff, 0xffff, 0xffff, 0,            # voltages, padding
    0)                                    # indep_throttle_status
assert len(table) == 120
open(sys.argv[1], 'wb').write(table)
PY

# PID 1000 (llama-server) opened client 217 and forked PID 1001, which
# inherited fd 5: one client, two holders. fd 7 is a dup of fd 5. It also
# has /dev/kfd open (ROCm).
client217() {
  printf 'drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t217\npasid:\t32774\n'
  printf 'drm-memory-vram:\t4194304 KiB\ndrm-memory-gtt: \t262144 KiB\ndrm-memory-cpu: \t0 KiB\n'
  printf 'amd-memory-visible-vram:\t4194304 KiB\namd-evicted-vram:\t0 KiB\namd-requested-vram:\t4194304 KiB\n'
  printf 'drm-engine-gfx:\t107322799 ns\ndrm-engine-compute:\t9000000000 ns\n'
}
fd $t 1000 0 /dev/null; fd $t 1000 1 'pipe:[1001]'; fd $t 1000 3 'socket:[2001]'
fd $t 1000 5 /dev/dri/renderD128; client217 | fdinfo $t 1000 5
fd $t 1000 6 /dev/kfd
fd $t 1000 7 /dev/dri/renderD128; client217 | fdinfo $t 1000 7
fd $t 1001 0 /dev/null
fd $t 1001 5 /dev/dri/renderD128; client217 | fdinfo $t 1001 5
# ... and PID 1001 has a client of its own (218), new-style keys.
fd $t 1001 8 /dev/dri/renderD128
fdinfo $t 1001 8 <<'X'
drm-driver:	amdgpu
drm-client-id:	218
drm-pdev:	0000:03:00.0
drm-total-cpu:	0
drm-shared-cpu:	0
drm-resident-cpu:	0
drm-total-gtt:	2048 KiB
drm-shared-gtt:	0
drm-resident-gtt:	2048 KiB
drm-total-vram:	524288 KiB
drm-shared-vram:	0
drm-resident-vram:	524288 KiB
drm-engine-gfx:	0 ns
X
# PID 1200 (a game): client 300, new-style keys, 64 MiB of its VRAM shared
# with the compositor (its window): 1.5 GiB - 64 MiB = 1472 MiB private.
fd $t 1200 0 /dev/null; fd $t 1200 4 'anon_inode:[eventfd]'
fd $t 1200 9 /dev/dri/renderD128
fdinfo $t 1200 9 <<'X'
drm-driver:	amdgpu
drm-client-id:	300
drm-pdev:	0000:03:00.0
pasid:	32781
drm-total-cpu:	0
drm-shared-cpu:	0
drm-active-cpu:	0
drm-resident-cpu:	0
drm-purgeable-cpu:	0
drm-total-gtt:	131072 KiB
drm-shared-gtt:	0
drm-active-gtt:	0
drm-resident-gtt:	131072 KiB
drm-purgeable-gtt:	0
drm-total-vram:	1572864 KiB
drm-shared-vram:	65536 KiB
drm-active-vram:	0
drm-resident-vram:	1572864 KiB
drm-purgeable-vram:	0
amd-evicted-vram:	0
amd-requested-vram:	1572864 KiB
amd-requested-gtt:	131072 KiB
drm-engine-gfx:	5000000000 ns
drm-engine-compute:	0 ns
drm-engine-dma:	1000000 ns
X
# PID 1300 (the X server) on the primary node card0: client 100.
fd $t 1300 12 /dev/dri/card0
fdinfo $t 1300 12 <<'X'
drm-driver:	amdgpu
drm-pdev:	0000:03:00.0
drm-client-id:	100
drm-memory-vram:	262144 KiB
drm-memory-gtt: 	16384 KiB
drm-memory-cpu: 	0 KiB
drm-engine-gfx:	2000000000 ns
X
meta $t 1000 llama-server llama-server -m /models/qwen3-8b-q4_k_m.gguf -ngl 99
meta $t 1001 llama-server llama-server --child
meta $t 1200 game.x86_64 ./game.x86_64
meta $t 1300 Xorg /usr/lib/xorg/Xorg :0
meta $t 1400 bash bash
# PID 1400 (a shell): no DRM fd. /proc/self points at it.
fd $t 1400 0 /dev/pts/0; fd $t 1400 1 /dev/pts/0; fd $t 1400 2 /dev/pts/0
ln -s 1400 $t/proc/self
# PID 1500 exited between listing and reading: the link is there, the
# fdinfo is not (ENOENT).
fd $t 1500 4 /dev/dri/renderD128
# PID 1600 is a zombie: no fd directory at all.
mkdir -p $t/proc/1600
printf '1600 (worker) Z 1 1600 1600 0 -1 4227148 0 0 0 0 0 0 0 0 20 0 1 0 5000 0 0\n' > $t/proc/1600/stat

###########################################################################
# amdgpu-apu: a Ryzen 7040 (Phoenix) APU with a model in GTT.
t=amdgpu-apu
d=$(pci_dev $t pci0000:00/0000:00:08.1 0000:c4:00.0 0x1002 0x15bf amdgpu)
node $t "$d" card0; node $t "$d" renderD128; connector $t "$d" card0 eDP-1
w $d/mem_info_vram_total 536870912          # a 512 MiB carve-out
w $d/mem_info_vram_used 104857600           # 100 MiB
w $d/mem_info_vis_vram_total 536870912
w $d/mem_info_vis_vram_used 104857600
w $d/mem_info_gtt_total 33285996544         # 31 GiB
w $d/mem_info_gtt_used 26214400000
w $d/gpu_busy_percent 88
w $d/mem_busy_percent 0
w $d/pp_dpm_sclk '0: 800Mhz\n1: 2700Mhz *'
h=$d/hwmon/hwmon5
w $h/name amdgpu
w $h/temp1_input 61000; w $h/temp1_label edge
w $h/power1_input 25000000                  # 25 W (APUs: input, no average)
# PID 2000 (an Ollama runner on ROCm): 24 GiB model in GTT, 5 MiB VRAM.
fd $t 2000 0 /dev/null; fd $t 2000 8 /dev/kfd
fd $t 2000 9 /dev/dri/renderD128
fdinfo $t 2000 9 <<'X'
drm-driver:	amdgpu
drm-pdev:	0000:c4:00.0
drm-client-id:	5
drm-memory-vram:	5348 KiB
drm-memory-gtt: 	25258000 KiB
drm-memory-cpu: 	0 KiB
drm-engine-gfx:	0 ns
drm-engine-compute:	0 ns
X
meta $t 2000 ollama /usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-1234
meta $t 2100 gnome-shell /usr/bin/gnome-shell
# PID 2100 (gnome-shell) on card0.
fd $t 2100 11 /dev/dri/card0
fdinfo $t 2100 11 <<'X'
drm-driver:	amdgpu
drm-pdev:	0000:c4:00.0
drm-client-id:	2
drm-memory-vram:	65536 KiB
drm-memory-gtt: 	12288 KiB
drm-memory-cpu: 	0 KiB
drm-engine-gfx:	88000000000 ns
X

###########################################################################
# intel: a desktop with the iGPU (i915, 00:02.0) and an Arc A770 (i915).
t=intel
i=$(pci_dev $t pci0000:00 0000:00:02.0 0x8086 0xa780 i915)
node $t "$i" card0; node $t "$i" renderD128; connector $t "$i" card0 HDMI-A-1
c=$t/sys/devices/pci0000:00/0000:00:02.0/drm/card0
w $c/gt_act_freq_mhz 350; w $c/gt_cur_freq_mhz 350; w $c/gt_RP0_freq_mhz 1650; w $c/gt_max_freq_mhz 1650
for r in status pl1 pl2 pl4 prochot ratl thermal vr_tdc vr_thermalert; do w $c/gt/gt0/throttle_reason_$r 0; done
a=$(pci_dev $t pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0 0000:03:00.0 0x8086 0x56a0 i915)
node $t "$a" card1; node $t "$a" renderD129
c=$t/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:03:00.0/drm/card1
w $c/gt_act_freq_mhz 2400; w $c/gt_cur_freq_mhz 2400; w $c/gt_RP0_freq_mhz 2400
for r in pl2 pl4 prochot ratl thermal vr_tdc vr_thermalert; do w $c/gt/gt0/throttle_reason_$r 0; done
w $c/gt/gt0/throttle_reason_status 1; w $c/gt/gt0/throttle_reason_pl1 1    # power-limited
w $a/current_link_speed '2.5 GT/s PCIe'; w $a/current_link_width 1    # DG2's own function
w $a/max_link_speed '2.5 GT/s PCIe'; w $a/max_link_width 1
h=$a/hwmon/hwmon4
w $h/name i915
w $h/power1_max 190000000; w $h/power1_rated_max 225000000
w $h/energy1_input 123456789000             # µJ; power comes from two readings
# PID 3000 (llama.cpp on SYCL) on the A770: 6 GiB in local0.
fd $t 3000 6 /dev/dri/renderD129
fdinfo $t 3000 6 <<'X'
drm-driver:	i915
drm-client-id:	41
drm-pdev:	0000:03:00.0
drm-total-system0:	8192 KiB
drm-shared-system0:	0
drm-active-system0:	0
drm-resident-system0:	8192 KiB
drm-purgeable-system0:	0
drm-total-local0:	6291456 KiB
drm-shared-local0:	0
drm-active-local0:	0
drm-resident-local0:	6291456 KiB
drm-purgeable-local0:	0
drm-engine-render:	0 ns
drm-engine-copy:	120000000 ns
drm-engine-video:	0 ns
drm-engine-capacity-video:	2
drm-engine-video-enhance:	0 ns
drm-engine-capacity-video-enhance:	2
drm-engine-compute:	30000000000 ns
drm-engine-capacity-compute:	4
X
# PID 3100 (a browser) on the iGPU: the kernel documentation's example.
fd $t 3100 30 /dev/dri/renderD128
fdinfo $t 3100 30 <<'X'
drm-driver:	i915
drm-client-id:	39
drm-pdev:	0000:00:02.0
drm-total-system0:	6044 KiB
drm-shared-system0:	0
drm-resident-system0:	6044 KiB
drm-purgeable-system0:	1688 KiB
drm-engine-render:	346249 ns
drm-engine-copy:	0 ns
drm-engine-video:	0 ns
drm-engine-capacity-video:	2
drm-engine-video-enhance:	0 ns
X
meta $t 3000 llama-server llama-server -m /models/model.gguf -ngl 99
meta $t 3100 firefox /usr/lib/firefox/firefox
meta $t 3200 Xorg /usr/lib/xorg/Xorg :0
# PID 3200 (the X server) on the iGPU: 128 MiB, 32 MiB of it shared.
fd $t 3200 14 /dev/dri/card0
fdinfo $t 3200 14 <<'X'
drm-driver:	i915
drm-client-id:	2
drm-pdev:	0000:00:02.0
drm-total-system0:	131072 KiB
drm-shared-system0:	32768 KiB
drm-resident-system0:	131072 KiB
drm-purgeable-system0:	0
drm-engine-render:	9000000000 ns
X

###########################################################################
# xe: an Arc B580 (Battlemage) on the xe driver: cycles, not nanoseconds.
t=xe
d=$(pci_dev $t pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0 0000:03:00.0 0x8086 0xe20b xe)
node $t "$d" card0; node $t "$d" renderD128
w $d/tile0/physical_vram_size_bytes 12884901888    # 12 GiB
for g in gt0 gt1; do
  f=$d/tile0/$g/freq0
  for r in status reason_pl1 reason_pl2 reason_pl4 reason_prochot reason_ratl reason_thermal reason_vr_tdc reason_vr_thermalert; do
    w $f/throttle/$r 0
  done
done
w $d/tile0/gt0/freq0/act_freq 2850; w $d/tile0/gt0/freq0/rp0_freq 2850
w $d/tile0/gt1/freq0/act_freq 1000; w $d/tile0/gt1/freq0/rp0_freq 1000
w $d/tile0/gt0/freq0/throttle/status 1; w $d/tile0/gt0/freq0/throttle/reason_thermal 1
h=$d/hwmon/hwmon3
w $h/name xe
w $h/temp2_input 55000; w $h/temp2_label pkg
w $h/temp3_input 62000; w $h/temp3_label vram
w $h/power1_max 190000000; w $h/energy1_input 5000000000
w $h/fan1_input 1200
meta $t 4000 vkcube vkcube
# PID 4000: the kernel documentation's xe example.
fd $t 4000 3 /dev/dri/renderD128
fdinfo $t 4000 3 <<'X'
drm-driver:	xe
drm-client-id:	3
drm-pdev:	0000:03:00.0
drm-total-system:	0
drm-shared-system:	0
drm-active-system:	0
drm-resident-system:	0
drm-purgeable-system:	0
drm-total-gtt:	192 KiB
drm-shared-gtt:	0
drm-active-gtt:	0
drm-resident-gtt:	192 KiB
drm-total-vram0:	23992 KiB
drm-shared-vram0:	16 MiB
drm-active-vram0:	0
drm-resident-vram0:	23992 KiB
drm-total-stolen:	0
drm-shared-stolen:	0
drm-active-stolen:	0
drm-resident-stolen:	0
drm-cycles-rcs:	28257900
drm-total-cycles-rcs:	7655183225
drm-cycles-bcs:	0
drm-total-cycles-bcs:	7655183225
drm-cycles-vcs:	0
drm-total-cycles-vcs:	7655183225
drm-engine-capacity-vcs:	2
drm-cycles-vecs:	0
drm-total-cycles-vecs:	7655183225
drm-engine-capacity-vecs:	2
drm-cycles-ccs:	0
drm-total-cycles-ccs:	7655183225
drm-engine-capacity-ccs:	4
X

###########################################################################
# soc: an RK3588 board: panfrost GPU (platform device, no PCI) and the
# display controller (rockchip-drm, a driver this tool does not know).
t=soc
g=$t/sys/devices/platform/fb000000.gpu
mkdir -p $g $t/sys/bus/platform/drivers/panfrost
ln -sr $t/sys/bus/platform/drivers/panfrost $g/driver
node $t "$g" card1; node $t "$g" renderD128
v=$t/sys/devices/platform/display-subsystem
mkdir -p $v $t/sys/bus/platform/drivers/rockchip-drm
ln -sr $t/sys/bus/platform/drivers/rockchip-drm $v/driver
node $t "$v" card0; connector $t "$v" card0 HDMI-A-1
meta $t 5000 glmark2 glmark2-es2-wayland
# PID 5000: the panfrost documentation's example, plus two broken lines.
fd $t 5000 7 /dev/dri/renderD128
fdinfo $t 5000 7 <<'X'
drm-driver:	panfrost
drm-client-id:	14
drm-engine-fragment:	1846584880 ns
drm-cycles-fragment:	1424359409
drm-maxfreq-fragment:	799999987 Hz
drm-curfreq-fragment:	799999987 Hz
drm-engine-vertex-tiler:	lots ns
this line has no colon
drm-cycles-vertex-tiler:	52617357
drm-maxfreq-vertex-tiler:	799999987 Hz
drm-curfreq-vertex-tiler:	799999987 Hz
drm-total-memory:	290 MiB
drm-shared-memory:	0 MiB
drm-active-memory:	226 MiB
drm-resident-memory:	36496 KiB
drm-purgeable-memory:	128 KiB
X
echo "fixtures written"
