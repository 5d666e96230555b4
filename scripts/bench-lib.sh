# Shared by the benchmark scripts (sourced, not run).

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# utime + stime of a process, in clock ticks (fields 14 and 15; the comm
# field may hold spaces, so count from its closing parenthesis).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
hz=$(getconf CLK_TCK)

# The fleet benchmarks' host: $nprocs real processes on a fake-NVML
# scenario of $gpus GPUs, one real `serve` ($bin, $lib) of it, and the
# exposition it wrote, in $work/template.prom. The processes and the serve
# join $pids (the serve last).
fleet_template() {
  for i in $(seq 1 "$nprocs"); do
    [ -e "$work/python3" ] || ln -s "$(command -v sleep)" "$work/python3"
    "$work/python3" 100000 &
    pids+=($!)
  done
  python3 - "$work/scenario.json" "$gpus" "${pids[@]}" <<'EOF'
import json, sys
out, gpus, pids = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
def device(i):
    mine = [p for k, p in enumerate(pids) if k % gpus == i or (k >= gpus and (k + 1) % gpus == i)]
    return {
        "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i:08x}-1111-2222-3333-444444444444",
        "pci_bus_id": f"00000000:{i + 1:02x}:00.0",
        "memory": {"total": 85520809984, "used": 60000000000, "free": 25520809984, "reserved": 0},
        "utilization": {"gpu": 87, "memory": 41}, "temperature_c": 61, "power_mw": 420000,
        "power_limit_mw": 700000, "fan_percent": 40,
        "compute_processes": [{"pid": p, "used_memory": 4 * 2**30 + p} for p in mine],
        "process_utilization": [{"pid": p, "sm": p % 100, "mem": p % 50} for p in mine],
    }
json.dump({"driver_version": "580.159.03", "cuda_driver_version": 13000,
           "devices": [device(i) for i in range(gpus)]}, open(out, "w"))
EOF
  port=$(free_port)
  FAKE_NVML_SCENARIO=$work/scenario.json "$bin" --nvml-lib "$lib" --no-discovery serve \
    --listen "127.0.0.1:$port" --interval 3600 > "$work/serve.out" 2> "$work/serve.err" &
  pids+=($!)
  for _ in $(seq 1 200); do grep -q ready "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
  sleep 1
  curl -sf "http://127.0.0.1:$port/metrics" > "$work/template.prom"
}
