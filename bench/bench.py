#!/usr/bin/env python3
"""Measuring and reporting for bench/run.sh (standard library only, except
`gguf-gen`, which needs the gguf package).

    bench.py scenario OUT GPUS PID...        fake-NVML scenario, the PIDs spread over GPUS devices
    bench.py time [--no-warmup] RESULTS SECTION CASE RUNS NAME=CMD...
                                             interleaved runs; median wall, CPU and peak RSS per NAME
    bench.py agree RESULTS CASE SCENARIO PYTHON GPUSTAT GPUTASKMAN
                                             every tool's per-process memory against the scenario
    bench.py gguf-gen OUT                    a sparse GGUF: 256k vocabulary, 8B-like tensor table
    bench.py file-read RESULTS CASE NAME FILE strace|smaps CMD...
                                             bytes of FILE that CMD reads
    bench.py record RESULTS JSON             append one result line
    bench.py report RESULTS [BENCHMARKS.md]  print the tables; with a file, replace its generated block

A result is one JSON line: {"section", "case", "name", ...figures}.
"""

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
BEGIN = "<!-- bench/run.sh: begin generated block -->"
END = "<!-- bench/run.sh: end generated block -->"


def append(results, row):
    with open(results, "a") as f:
        f.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------- scenario


def process_bytes(i):
    """A per-process figure that is not a whole number of MiB (so rounding shows)."""
    return (96 + (i * 37) % 900) * MIB + (i * 4099) % MIB


def scenario(out, gpus, pids):
    devices = []
    for d in range(gpus):
        mine = [(i, p) for i, p in enumerate(pids) if i % gpus == d]
        compute = [{"pid": p, "used_memory": process_bytes(i)} for i, p in mine if i % 4 != 3]
        graphics = [{"pid": p, "used_memory": process_bytes(i)} for i, p in mine if i % 4 == 3]
        used = sum(process_bytes(i) for i, _ in mine) + 512 * MIB
        total = 80 * 1024 * MIB
        devices.append(
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-0b5e7c2a-1d3f-4a6b-8c9d-{d:012x}",
                "pci_bus_id": f"00000000:{0x18 + d * 0x10:02X}:00.0",
                "serial": f"165422{d:07d}",
                "brand": 2,
                "architecture": 9,
                "minor_number": d,
                "cuda_compute_capability": {"major": 9, "minor": 0},
                "memory": {"total": total, "used": used, "free": total - used},
                "bar1": {"total": 128 * 1024 * MIB, "free": 127 * 1024 * MIB, "used": 1024 * MIB},
                "utilization": {"gpu": 37 + d, "memory": 12 + d},
                "encoder_utilization": 0,
                "decoder_utilization": 0,
                "temperature_c": 41 + d,
                "power_mw": 180000 + d * 1000,
                "power_limit_mw": 700000,
                "performance_state": 0,
                "fan_percent": 30,
                "clocks": {"graphics_mhz": 1755, "sm_mhz": 1755, "memory_mhz": 2619, "video_mhz": 1500},
                "max_clocks": {"graphics_mhz": 1980, "sm_mhz": 1980, "memory_mhz": 2619, "video_mhz": 1545},
                "pcie": {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16, "tx_kbps": 20000, "rx_kbps": 30000},
                "compute_mode": 0,
                "persistence_mode": True,
                "display_active": False,
                "display_mode": False,
                "mig_mode": {"current": 0, "pending": 0},
                "ecc": {"current": True, "volatile_corrected": 0, "volatile_uncorrected": 0},
                "compute_processes": compute,
                "graphics_processes": graphics,
                "process_utilization": [
                    {"pid": p, "sm": (i * 7) % 100, "mem": (i * 3) % 50} for i, p in mine if i % 2 == 0
                ],
            }
        )
    doc = {
        "driver_version": "580.159.03",
        "cuda_driver_version": 13000,
        "nvml_version": "13.580.159.03",
        "devices": devices,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def expected(scenario_file):
    """{(device, pid): bytes} from a scenario."""
    doc = json.load(open(scenario_file))
    want = {}
    for d, dev in enumerate(doc["devices"]):
        for p in dev.get("compute_processes", []) + dev.get("graphics_processes", []):
            want[(d, p["pid"])] = p["used_memory"]
    return want


# ---------------------------------------------------------------- timing


def run_once(argv):
    """Wall seconds, CPU seconds and peak RSS (KiB) of one run, interpreter start-up included."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"bench: {shlex.join(argv)} exited {child.returncode}: {stderr.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def time_cmds(results, section, case, runs, specs, warmup=True):
    cmds = []
    for spec in specs:
        name, _, cmd = spec.partition("=")
        cmds.append((name, shlex.split(cmd)))
    for _, argv in cmds if warmup else []:  # warm-up: page cache, Python bytecode caches
        run_once(argv)
    samples = {name: [] for name, _ in cmds}
    for r in range(runs):
        # Interleaved, and the order rotates so no tool always runs first.
        for k in range(len(cmds)):
            name, argv = cmds[(k + r) % len(cmds)]
            samples[name].append(run_once(argv))
    for name, argv in cmds:
        s = samples[name]
        row = {
            "section": section,
            "case": case,
            "name": name,
            "cmd": shlex.join(argv),
            "runs": runs,
            "wall_s": statistics.median(x[0] for x in s),
            "wall_min_s": min(x[0] for x in s),
            "wall_max_s": max(x[0] for x in s),
            "cpu_s": statistics.median(x[1] for x in s),
            "rss_kib": statistics.median(x[2] for x in s),
        }
        append(results, row)
        print(
            f"  {case:<14} {name:<22} wall {row['wall_s'] * 1e3:9.1f} ms  cpu {row['cpu_s'] * 1e3:9.1f} ms"
            f"  peak RSS {row['rss_kib'] / 1024:7.1f} MiB  ({runs} runs)",
            flush=True,
        )


# ---------------------------------------------------------------- agreement

NVITOP_SNIPPET = """
import json
from nvitop import Device
rows = []
for d in Device.all():
    for pid, p in d.processes().items():
        rows.append([d.index, pid, p.gpu_memory()])
print(json.dumps(rows))
"""


def agree(results, case, scenario_file, python, gpustat, gputaskman):
    want = expected(scenario_file)
    problems = []

    def check(tool, got, to_bytes, slack):
        for key, value in want.items():
            if key not in got:
                problems.append(f"{tool}: GPU {key[0]} PID {key[1]} missing")
            elif abs(to_bytes(got[key]) - value) > slack:
                problems.append(f"{tool}: GPU {key[0]} PID {key[1]}: {got[key]} against {value} bytes")
        for key in got.keys() - want.keys():
            problems.append(f"{tool}: GPU {key[0]} PID {key[1]} not in the scenario")

    # gpustat: MiB, floor division (gpu_memory_usage = usedGpuMemory // MB).
    doc = json.loads(subprocess.run([gpustat, "--json"], check=True, capture_output=True).stdout)
    got = {(g["index"], p["pid"]): p["gpu_memory_usage"] for g in doc["gpus"] for p in g["processes"]}
    check("gpustat", got, lambda mib: mib * MIB, MIB)

    # nvitop: its own API (the same library calls as `nvitop -1`), bytes.
    rows = json.loads(subprocess.run([python, "-c", NVITOP_SNIPPET], check=True, capture_output=True).stdout)
    check("nvitop", {(d, pid): b for d, pid, b in rows}, lambda b: b if isinstance(b, int) else -1, 0)

    # gputaskman: bytes.
    doc = json.loads(subprocess.run([gputaskman, "--json"], check=True, capture_output=True).stdout)
    got = {}
    for p in doc["processes"]:
        for g in p.get("gpu") or []:
            if g.get("vram_bytes") is not None:
                got[(g["device"], p["pid"])] = g["vram_bytes"]
    check("gputaskman", got, lambda b: b, 0)

    if problems:
        print("bench: the tools disagree on per-process memory; the figures would measure nothing:", file=sys.stderr)
        for p in problems[:40]:
            print("  " + p, file=sys.stderr)
        sys.exit(1)
    append(results, {"section": "agree", "case": case, "name": "all", "count": len(want)})
    print(f"  agreement: gpustat, nvitop and gputaskman report all {len(want)} process figures as in the scenario")


# ---------------------------------------------------------------- GGUF


def gguf_gen(out):
    """A GGUF whose header is a real 256k-vocabulary one (tokens, scores, token types) in front of an
    8B-like table of Q4_K tensors. The tensor data is a hole (sparse file): only the header is written."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter

    vocab = 262144
    embd, ff, layers = 4096, 14336, 32
    tmp = out + ".tmp"
    w = GGUFWriter(tmp, "llama")
    w.add_name("generated-256k-vocab")
    w.add_block_count(layers)
    w.add_context_length(131072)
    w.add_embedding_length(embd)
    w.add_feed_forward_length(ff)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(15)  # MOSTLY_Q4_K_M
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("llama")
    # Token strings shaped like a real vocabulary's: mostly short, some long.
    w.add_token_list([f"\u2581tok{i}" + "x" * (i % 13) for i in range(vocab)])
    w.add_token_scores([float(-i) for i in range(vocab)])
    w.add_token_types([1] * vocab)
    q4k = GGMLQuantizationType.Q4_K
    nbytes_q4k = lambda n: n // 256 * 144  # noqa: E731  (256 weights per 144-byte block)

    def tensor(name, shape, kind=q4k):
        n = int(np.prod(shape))
        if kind == q4k:
            byte_shape = list(reversed(shape[1:])) + [shape[0] // 256 * 144]
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes_q4k(n), raw_dtype=q4k)
        else:
            w.add_tensor_info(name, list(reversed(shape)), np.dtype(np.float32), n * 4)

    tensor("token_embd.weight", [embd, vocab])
    for b in range(layers):
        tensor(f"blk.{b}.attn_norm.weight", [embd], None)
        tensor(f"blk.{b}.attn_q.weight", [embd, embd])
        tensor(f"blk.{b}.attn_k.weight", [embd, 1024])
        tensor(f"blk.{b}.attn_v.weight", [embd, 1024])
        tensor(f"blk.{b}.attn_output.weight", [embd, embd])
        tensor(f"blk.{b}.ffn_norm.weight", [embd], None)
        tensor(f"blk.{b}.ffn_gate.weight", [embd, ff])
        tensor(f"blk.{b}.ffn_up.weight", [embd, ff])
        tensor(f"blk.{b}.ffn_down.weight", [ff, embd])
    tensor("output_norm.weight", [embd], None)
    tensor("output.weight", [embd, vocab])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    align = 32
    with open(tmp, "r+b") as f:
        header = f.seek(0, os.SEEK_END)
        data_start = (header + align - 1) // align * align
        data = sum((t.nbytes + align - 1) // align * align for shard in w.tensors for t in shard.values())
        f.truncate(data_start + data)
    os.rename(tmp, out)
    print(f"  generated {out}: header {header} bytes, file {data_start + data} bytes (sparse)")


def resident_bytes(path):
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path], check=True, capture_output=True)
    return int(out.stdout.split()[0])


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd) if os.access(path, os.W_OK) else None
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


SMAPS_SNIPPET = """
import os, sys
from gguf import GGUFReader
reader = GGUFReader(sys.argv[1])
path, rss, mine = os.path.realpath(sys.argv[1]), 0, False
for line in open("/proc/self/smaps"):
    parts = line.split()
    if len(parts) >= 5 and "-" in parts[0] and len(parts[1]) == 4:
        mine = len(parts) >= 6 and parts[5] == path
    elif parts[0] == "Rss:" and mine:
        rss += int(parts[1]) * 1024
print(rss)
"""


def asked_bytes(path, how, argv):
    """What the reader itself takes of PATH: bytes returned by read() calls on it (strace), or the pages of
    its mapping of PATH that it touched (GGUFReader maps the file: its mapping's Rss, read in-process)."""
    if how == "smaps":
        return int(subprocess.run(argv + ["-c", SMAPS_SNIPPET, path], check=True, capture_output=True).stdout)
    if not shutil.which("strace"):
        return None
    log = path + ".strace"
    trace = ["strace", "-f", "-qq", "-y", "-e", "trace=read,pread64,readv,preadv,preadv2", "-o", log]
    subprocess.run(trace + argv, check=True, stdout=subprocess.DEVNULL)
    real, total = os.path.realpath(path), 0
    for line in open(log):
        m = re.search(r"\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)", line)
        if m and m.group(2) == real:
            total += int(m.group(3))
    os.unlink(log)
    return total


def file_read(results, case, name, path, how, argv):
    """Bytes of PATH read by one run of ARGV. `asked`: what the reader takes (see asked_bytes). `cold`: the
    file's pages that one run from a cold file brings into the page cache (kernel read-ahead included, so it
    depends on the disk's read_ahead_kb). PATH must be a private copy that nobody else maps, or eviction
    leaves pages behind."""
    evict(path)
    left = resident_bytes(path)
    if left > 1 << 20:
        sys.exit(f"bench: could not evict {path} from the page cache ({left} bytes stay resident)")
    asked = asked_bytes(path, how, argv)
    cold = resident_bytes(path) - left
    size = os.path.getsize(path)
    row = {"section": "gguf-read", "case": case, "name": name, "bytes": asked, "cold_bytes": cold, "file_bytes": size}
    append(results, row)
    a = f"{asked:,} bytes ({asked / size * 100:.3f} %)" if asked is not None else "n/a (no strace)"
    print(f"  {case:<14} {name:<22} read {a}; page cache from cold {cold:,} ({cold / size * 100:.3f} %)", flush=True)


# ---------------------------------------------------------------- report


def load(results):
    rows = [json.loads(line) for line in open(results) if line.strip()]
    meta = {}
    for r in rows:
        if r["section"] == "meta":
            meta.update(r)
    return rows, meta


def find(rows, section, case, name):
    for r in rows:
        if r["section"] == section and r["case"] == case and r["name"] == name:
            return r
    return None


def ms(s):
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def ratio(a, b):
    if a is None or b is None or not b:
        return "n/a"
    x = a / b
    return f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


def times(x):
    """A ratio as 'N× less/faster': b / a."""
    return f"{x:,.1f}×" if x < 100 else f"{x:,.0f}×"


def busy(loads, cores):
    """The 1-minute load averages among LOADS (strings of /proc/loadavg fields) that exceed CORES."""
    try:
        cores = int(cores)
    except (TypeError, ValueError):
        return []
    over = []
    for text in loads:
        for part in str(text).split("/"):
            fields = part.split()
            if fields and float(fields[0]) > cores:
                over.append(fields[0])
    return over


def report(results, target=None):
    rows, meta = load(results)
    out = []
    w = out.append
    w(BEGIN)
    w("")
    w(
        f"Run of {meta.get('date', '?')} on {meta.get('machine', '?')}; {meta.get('os', '')}; "
        f"commit {meta.get('commit', '?')}; {meta.get('versions', '')}. "
        f"Load average {meta.get('load_start', '?')} at the start, {meta.get('load_end', '?')} at the end; "
        f"run took {meta.get('duration', '?')}. Settings: {meta.get('settings', '')}."
    )
    cores = meta.get("cores")
    over = busy([meta.get("load_start", ""), meta.get("load_end", "")] + [r["load"] for r in rows if "load" in r], cores)
    if over:
        w("")
        w(
            f"**Warning: not a quiet machine.** The load average reached {max(over, key=float)} on {cores} cores "
            "during this run: other work shared the CPUs, so wall times (and the interpreters' start-up that the "
            "peers' times hold) are inflated. Rerun on a quiet machine before reading the ratios."
        )
    snap_cases = sorted({r["case"] for r in rows if r["section"] == "snapshot"}, key=lambda c: int(c.split()[0]))
    if snap_cases:
        w("")
        w("**1. One snapshot**, same fake GPUs, interleaved runs, medians; wall time and peak RSS of the")
        w("whole process (interpreter start-up included). Ratio = gputaskman / peer; under 0.10 is 10× faster.")
        w("")
        w("| GPUs, processes | gputaskman --once | nvitop -1 | ratio | gputaskman --json | gpustat --json | ratio |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for c in snap_cases:
            o, n = find(rows, "snapshot", c, "gputaskman --once"), find(rows, "snapshot", c, "nvitop -1")
            j, g = find(rows, "snapshot", c, "gputaskman --json"), find(rows, "snapshot", c, "gpustat --json")
            cells = [c]
            for a, b in ((o, n), (j, g)):
                cells += [ms(a["wall_s"]) if a else "n/a", ms(b["wall_s"]) if b else "n/a",
                          ratio(a and a["wall_s"], b and b["wall_s"])]
            w("| " + " | ".join(cells) + " |")
        w("")
        w("| GPUs, processes | CPU: gputaskman --once / nvitop -1 | CPU: --json / gpustat | peak RSS: gputaskman --once | nvitop -1 | ratio | gputaskman --json | gpustat --json | ratio |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in snap_cases:
            o, n = find(rows, "snapshot", c, "gputaskman --once"), find(rows, "snapshot", c, "nvitop -1")
            j, g = find(rows, "snapshot", c, "gputaskman --json"), find(rows, "snapshot", c, "gpustat --json")
            cells = [c]
            for a, b in ((o, n), (j, g)):
                cells.append(
                    f"{ms(a['cpu_s'])} / {ms(b['cpu_s'])} = {ratio(a['cpu_s'], b['cpu_s'])}" if a and b else "n/a"
                )
            for a, b in ((o, n), (j, g)):
                mib = lambda r: f"{r['rss_kib'] / 1024:.1f} MiB" if r else "n/a"  # noqa: E731
                cells += [mib(a), mib(b), ratio(a and a["rss_kib"], b and b["rss_kib"])]
            w("| " + " | ".join(cells) + " |")
        agreed = [r for r in rows if r["section"] == "agree"]
        if agreed:
            w("")
            w(
                "Agreement: at every size gpustat (`--json`, MiB), nvitop (its `Device.processes()`, bytes) and "
                "gputaskman (`--json`, bytes) gave every per-process memory figure of the scenario ("
                + ", ".join(f"{r['case']}: {r['count']}" for r in agreed)
                + " figures)."
            )
    live = [r for r in rows if r["section"] == "live"]
    if live:
        cases = sorted({r["case"] for r in live}, key=lambda c: (int(c.split("+")[0]), c))
        names = [n for n in ("gputaskman", "nvitop", "top", "htop") if any(r["name"] == n for r in live)]
        w("")
        w(
            f"**2. Live cost** at 1 s refresh over {live[0]['secs']} s, all programs in their own tmux pane during "
            "the same window: CPU per refresh (utime+stime from /proc/PID/stat / refreshes) and % of one core."
        )
        w("")
        w("| sleepers (processes on the machine) | " + " | ".join(names) + " | gputaskman / nvitop | gputaskman / top | load average (before / after) |")
        w("|---|" + "---:|" * (len(names) + 2) + "---|")
        for c in cases:
            cells = [f"{c} ({find(rows, 'live', c, names[0])['procs']})"]
            for n in names:
                r = find(rows, "live", c, n)
                cells.append(f"{r['cpu_s'] / r['secs'] * 1e3:.2f} ms, {r['cpu_s'] / r['secs'] * 100:.2f} %" if r else "n/a")
            a, b = find(rows, "live", c, "gputaskman"), find(rows, "live", c, "nvitop")
            t = find(rows, "live", c, "top")
            cells.append(ratio(a and a["cpu_s"], b and b["cpu_s"]))
            cells.append(ratio(a and a["cpu_s"], t and t["cpu_s"]))
            load_ = a.get("load", "n/a") if a else "n/a"
            cells.append(load_ + (" **(over the core count)**" if busy([load_], cores) else ""))
            w("| " + " | ".join(cells) + " |")
        firsts = [r for r in live if r["name"] == "gputaskman" and "first_ms" in r]
        if firsts:
            w("")
            w("gputaskman's first figures on screen, from launch in tmux: " + ", ".join(
                f"{r['first_ms']} ms at {r['case']}" + ("" if "+" in r["case"] else " sleepers") for r in firsts) + ".")
    gg = [r for r in rows if r["section"] == "gguf"]
    if gg:
        w("")
        w("**3. GGUF header**: whole process on a warm file (page cache), medians. Bytes read: what the reader")
        w("takes of the file (gputaskman: bytes its read() calls return, by strace; GGUFReader maps the file:")
        w("the resident pages of its mapping afterwards), then what one run from a cold file brings into the")
        w("page cache (the kernel's read-ahead included).")
        w("")
        w("| file | gputaskman model | GGUFReader | GGUFReader / gputaskman | `import gguf` alone | bytes read: gputaskman | GGUFReader | from cold: gputaskman / GGUFReader |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        for c in sorted({r["case"] for r in gg}):
            a, b = find(rows, "gguf", c, "gputaskman model"), find(rows, "gguf", c, "GGUFReader")
            base = find(rows, "gguf", c, "import gguf")
            ra, rb = find(rows, "gguf-read", c, "gputaskman model"), find(rows, "gguf-read", c, "GGUFReader")

            def pct(r, key="bytes"):
                if not r or r.get(key) is None:
                    return "n/a"
                return f"{r[key] / 1e6:.2f} MB ({r[key] / r['file_bytes'] * 100:.2f} %)"

            size = (ra or rb or {}).get("file_bytes")
            w(f"| {c} ({size / 1e9:.2f} GB) | {ms(a['wall_s']) if a else 'n/a'} | {ms(b['wall_s']) if b else 'n/a'} | "
              f"{times(b['wall_s'] / a['wall_s']) if a and b else 'n/a'} | {ms(base['wall_s']) if base else 'n/a'} | "
              f"{pct(ra)} | {pct(rb)} | {pct(ra, 'cold_bytes')} / {pct(rb, 'cold_bytes')} |")
    disc = [r for r in rows if r["section"] == "discovery"]
    info = {r["case"]: r for r in rows if r["section"] == "discovery-info"}
    if disc:
        w("")
        w("**4. Discovery**: one `gputaskman --once` (no NVML) with model processes running, medians.")
        w("")
        w("| model processes | kind | wall | CPU | peak RSS | models found |")
        w("|---:|---|---:|---:|---:|---:|")
        for r in sorted(disc, key=lambda r: int(r["case"])):
            r = {**info.get(r["case"], {}), **r}
            w(f"| {r['case']} | {r.get('kind', '')} | {ms(r['wall_s'])} | {ms(r['cpu_s'])} | {r['rss_kib'] / 1024:.1f} MiB | {r.get('found', 'n/a')} |")
    for r in (r for r in rows if r["section"] == "rss"):
        w("")
        w(
            f"**5. Live view's memory**: peak RSS (VmHWM) {r['hwm_kib'] / 1024:.1f} MiB after {r['minutes']} min at 1 s "
            f"with {r['case']} sleepers and four idle model servers ({r['procs']} processes on the machine); RSS "
            f"{r['rss_minute_kib'] / 1024:.1f} MiB after the first minute (or the run, when shorter), "
            f"{r['rss_end_kib'] / 1024:.1f} MiB at the end. "
            f"Load average {r['load']}" + (" **(over the core count)**." if busy([r["load"]], cores) else ".")
        )
    for r in (r for r in rows if r["section"] == "churn"):
        c = r["churn"]
        w("")
        w(
            f"**6. Churn**: the live view (`a`: every AI process listed) for {r['minutes']} min while "
            f"{c['started']} processes started and exited ({c['started'] / c['secs']:.0f} a second, each an AI "
            f"process by its name living {r.get('life', 0.02)} s), {r['procs']} processes on the machine after: "
            f"RSS {r['rss_minute_kib'] / 1024:.1f} MiB after the first minute, {r['rss_end_kib'] / 1024:.1f} MiB "
            f"at the end, peak (VmHWM) {r['hwm_kib'] / 1024:.1f} MiB; churned processes' rows: at most "
            f"{r['rows_max']} on screen at a refresh, {r['rows_after']} a refresh after the last exited. "
            f"Load average {r['load']}."
        )
    for r in (r for r in rows if r["section"] == "serve"):
        w("")
        w(
            f"**7. serve** at {r['case']} GPU processes (scripts/bench_serve.sh): {r['metrics_ms']:.3f} ms of "
            f"server CPU a /metrics scrape, {r['snapshot_ms']:.3f} ms a /snapshot. Load average {r['load']}."
        )
    for r in (r for r in rows if r["section"] == "record"):
        w("")
        w(
            f"**7. record** `--interval 1` at {r['case']} GPU processes: {r['cpu_percent']:.2f} % of a core; "
            f"{r['zstd_bytes_per_line']} bytes a snapshot line with zstd ({r['plain_bytes_per_line']} plain, "
            f"{r['lines']} lines). Load average {r['load']}."
        )
    w("")
    w(END)
    text = "\n".join(out) + "\n"
    print(text)
    if target:
        doc = open(target).read()
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            doc = head + text.rstrip("\n") + tail
        else:
            doc = doc.rstrip("\n") + "\n\n" + text
        with open(target, "w") as f:
            f.write(doc)
        print(f"wrote the table into {target}")


def churn(rate, secs, program, args, out):
    """Starts `rate` processes a second for `secs` seconds (`program` with
    `args`: each lives as long as they say), reaps each as it exits, and
    writes to `out` how many it started, over how long, and the most alive
    at once. At most `rate` / 4 live at once: on a machine too busy to run
    them as fast as they start, the rate drops (the figure says so) rather
    than the PIDs run out."""
    started = 0
    alive = set()
    most = 0
    begin = time.monotonic()
    tick = 0.01
    while True:
        now = time.monotonic() - begin
        if now >= secs:
            break
        due = int(min(now + tick, secs) * rate)
        while started < due:
            if len(alive) >= max(rate // 4, 1):
                pid, _ = os.waitpid(-1, 0)
                alive.discard(pid)
                continue
            alive.add(os.posix_spawn(program, [os.path.basename(program)] + args, os.environ))
            started += 1
        most = max(most, len(alive))
        while alive:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            alive.discard(pid)
        time.sleep(max(0.0, begin + (due / rate) - time.monotonic()))
    for pid in alive:
        os.waitpid(pid, 0)
    with open(out, "w") as f:
        json.dump({"started": started, "secs": time.monotonic() - begin, "most_alive": most}, f)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "scenario":
        scenario(args[0], int(args[1]), [int(p) for p in args[2:]])
    elif cmd == "time":
        warmup = args[0] != "--no-warmup"
        args = args if warmup else args[1:]
        time_cmds(args[0], args[1], args[2], int(args[3]), args[4:], warmup)
    elif cmd == "agree":
        agree(*args)
    elif cmd == "gguf-gen":
        gguf_gen(args[0])
    elif cmd == "file-read":
        file_read(args[0], args[1], args[2], args[3], args[4], args[5:])
    elif cmd == "record":
        append(args[0], json.loads(args[1]))
    elif cmd == "report":
        report(args[0], args[1] if len(args) > 1 else None)
    elif cmd == "churn":
        churn(int(args[0]), float(args[1]), args[2], args[3:-1], args[-1])
    else:
        sys.exit(f"bench.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
