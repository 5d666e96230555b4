#!/usr/bin/env bash
# Writes the Jetson fixture trees next to this script: a /proc and a /sys
# each, laid out as JetPack lays them out (README.md says from where).
# Rerun after editing; the result is committed, symlinks and all. Values
# the tests assert are commented where they are made.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf orin xavier orin-no-debugfs nano

w() { mkdir -p "$(dirname "$1")"; printf '%b' "$2" > "$1"; }

# process TREE PID COMM LIBS...: what the process scan reads (stat,
# status, cmdline, maps with LIBS mapped).
process() {
  local tree=$1 pid=$2 comm=$3; shift 3
  local dir=$tree/proc/$pid
  w "$dir/stat" "$pid ($comm) S 1 $pid $pid 0 -1 4194560 1000 0 0 0 500 100 0 0 20 0 8 0 123456 8589934592 262144 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 3 0 0 0 0 0\n"
  w "$dir/status" "Name:\t$comm\nState:\tS (sleeping)\nTgid:\t$pid\nPid:\t$pid\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n"
  printf '%s\0' "/usr/bin/$comm" > "$dir/cmdline"
  : > "$dir/maps"
  local lib
  for lib in "$@"; do
    printf 'ffff8a000000-ffff8a100000 r-xp 00000000 103:02 4242 %s\n' "$lib" >> "$dir/maps"
  done
}

# board TREE GPU MODEL COMPATIBLE MEMTOTAL_KB LOAD CUR_HZ MAX_HZ: the GPU's
# platform device and its devfreq node (a link to it, as in
# /sys/class/devfreq), the device tree's model and compatible (NUL-separated
# strings, "," in COMPATIBLE), /proc/meminfo and /proc/stat.
board() {
  local tree=$1 gpu=$2 model=$3 compatible=$4 mem=$5 load=$6 cur=$7 max=$8
  local dev=$tree/sys/devices/platform/$gpu
  w "$dev/load" "$load\n"
  w "$dev/devfreq/$gpu/cur_freq" "$cur\n"
  w "$dev/devfreq/$gpu/max_freq" "$max\n"
  w "$dev/devfreq/$gpu/min_freq" "306000000\n"
  ln -sr "$dev" "$dev/devfreq/$gpu/device"
  mkdir -p "$tree/sys/class/devfreq"
  ln -sr "$dev/devfreq/$gpu" "$tree/sys/class/devfreq/$gpu"
  # Other devfreq nodes that are not the GPU.
  w "$tree/sys/class/devfreq/15340000.vic/cur_freq" "115200000\n"
  printf '%s\0' "$model" > "$tmp_model"
  mkdir -p "$tree/sys/firmware/devicetree/base"
  cp "$tmp_model" "$tree/sys/firmware/devicetree/base/model"
  local c
  for c in $compatible; do printf '%s\0' "$c"; done > "$tree/sys/firmware/devicetree/base/compatible"
  w "$tree/proc/meminfo" "MemTotal:       $mem kB\nMemFree:        1203400 kB\nMemAvailable:   9841000 kB\n"
  w "$tree/proc/stat" "cpu  1 0 1 100 0 0 0 0 0 0\nbtime 1764500000\n"
}

# zone TREE N TYPE MILLIDEGREES
zone() { w "$1/sys/class/thermal/thermal_zone$2/type" "$3\n"; w "$1/sys/class/thermal/thermal_zone$2/temp" "$4\n"; }

# ina TREE HWMON LABEL1 MV1 MA1 LABEL2 MV2 MA2 LABEL3 MV3 MA3
ina() {
  local h=$1/sys/class/hwmon/$2
  w "$h/name" "ina3221\n"
  local ch
  for ch in 1 2 3; do
    local i=$(( (ch - 1) * 3 + 3 ))
    local label=${!i} mv_i=$((i + 1)) ma_i=$((i + 2))
    w "$h/in${ch}_label" "$label\n"
    w "$h/in${ch}_input" "${!mv_i}\n"
    w "$h/curr${ch}_input" "${!ma_i}\n"
  done
}

# clients TREE: nvmap's client list from stdin, as nvmap_dev.c prints it.
clients() { mkdir -p "$1/sys/kernel/debug/nvmap/iovmm"; cat > "$1/sys/kernel/debug/nvmap/iovmm/clients"; }

tmp_model=$(mktemp)
trap 'rm -f "$tmp_model"' EXIT

###########################################################################
# orin: Jetson AGX Orin 32GB developer kit, JetPack 5 (L4T 35).
t=orin
board $t 17000000.ga10b "NVIDIA Jetson AGX Orin Developer Kit" \
  "nvidia,p3737-0000+p3701-0005 nvidia,p3701-0005 nvidia,tegra234" 31697608 537 918000000 1300500000
#                                                      load 53.7% -> 54; 918 MHz; 1300 MHz max
zone $t 0 cpu-thermal 47062
zone $t 1 gpu-thermal 45187     # 45 C
zone $t 2 cv0-thermal 44906
zone $t 3 soc0-thermal 46218
zone $t 4 tj-thermal 47062
w $t/sys/class/hwmon/hwmon0/name "tegra_pwm_fan\n"
ina $t hwmon1 VDD_GPU_SOC 5080 960 VDD_CPU_CV 5080 480 VIN_SYS_5V0 5000 1520
#             4.8768 W (the GPU's)  2.4384 W             7.6 W
ina $t hwmon2 NC 0 0 VDDQ_VDD2_1V8AO 5016 96 NC 0 0
clients $t <<'LIST'
CLIENT                        PROCESS      PID        SIZE
user                      gnome-shell     1960     40260K
user                             Xorg     1783     83204K
user                     llama-server     4242   4194304K
user                  nvargus-daemon      1101     12288K
total                                             4330056K
LIST
process $t 1960 gnome-shell /usr/lib/aarch64-linux-gnu/libEGL.so.1
process $t 1783 Xorg /usr/lib/aarch64-linux-gnu/tegra/libnvrm_gpu.so
process $t 4242 llama-server /usr/local/cuda-11.4/targets/aarch64-linux/lib/libcudart.so.11.0 /opt/llama.cpp/build/bin/libggml-cuda.so
# 1101 has exited: its nvmap client outlives it in the list.

###########################################################################
# orin-no-debugfs: the same board with debugfs not mounted.
t=orin-no-debugfs
board $t 17000000.gpu "NVIDIA Jetson Orin Nano Developer Kit" \
  "nvidia,p3768-0000+p3767-0005 nvidia,p3767-0005 nvidia,tegra234" 7802108 0 306000000 624750000
zone $t 0 cpu-thermal 41000
zone $t 1 gpu-thermal 39500     # 40 C (rounded half up)
ina $t hwmon1 VDD_IN 5000 1200 VDD_CPU_GPU_CV 5000 400 VDD_SOC 5000 300
#             6 W                2 W (shared with CPU and CV)
process $t 4242 llama-server /usr/local/cuda-12.2/targets/aarch64-linux/lib/libcudart.so.12
mkdir -p $t/sys/kernel

###########################################################################
# xavier: Jetson AGX Xavier, JetPack 5 (L4T 35): hwmon INA3221 channels
# named GPU, CPU, SOC (0x40) and CV, VDDRQ, SYS5V (0x41).
t=xavier
board $t 17000000.gv11b "Jetson-AGX" "nvidia,p2972-0000 nvidia,tegra194" 32509944 1000 1377000000 1377000000
#                                            100%; 1377 MHz
zone $t 0 CPU-therm 52500
zone $t 1 GPU-therm 50000       # 50 C
zone $t 2 AUX-therm 50500
zone $t 3 Tboard_tegra 41000
ina $t hwmon0 GPU 19024 1504 CPU 19040 288 SOC 19032 752
#             28.612 W
ina $t hwmon1 CV 19048 0 VDDRQ 19040 208 SYS5V 4984 1120
clients $t <<'LIST'
CLIENT                        PROCESS      PID        SIZE
user                          python3     3001   6291456K
total                                             6291456K
LIST
process $t 3001 python3 /usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so /usr/local/cuda/lib64/libcudart.so.11.0

###########################################################################
# nano: Jetson Nano developer kit, JetPack 4.6 (L4T 32): devfreq
# 57000000.gpu, the ina3221x IIO driver (rail_name_N, in_powerN_input in
# mW), thermal zone GPU-therm.
t=nano
board $t 57000000.gpu "NVIDIA Jetson Nano Developer Kit" "nvidia,p3449-0000-b00+p3448-0002 nvidia,jetson-nano nvidia,tegra210" 4051032 998 921600000 921600000
#                                                   99.8% -> 100; 921 MHz
zone $t 0 AO-therm 38500
zone $t 1 CPU-therm 36500
zone $t 2 GPU-therm 35500       # 36 C
zone $t 3 PLL-therm 34750
iio=$t/sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0
w $iio/rail_name_0 "POM_5V_IN\n";  w $iio/in_power0_input "4716\n"
w $iio/rail_name_1 "POM_5V_GPU\n"; w $iio/in_power1_input "2117\n"   # 2.117 W
w $iio/rail_name_2 "POM_5V_CPU\n"; w $iio/in_power2_input "1011\n"
clients $t <<'LIST'
CLIENT                        PROCESS      PID        SIZE
user                     llama-server     2222   1572864K
user                          Xorg         901     30720K
total                                             1603584K
LIST
process $t 2222 llama-server /usr/local/cuda-10.2/targets/aarch64-linux/lib/libcudart.so.10.2
process $t 901 Xorg /usr/lib/aarch64-linux-gnu/tegra/libnvrm_gpu.so
