"""A real llama.cpp server for the end-to-end tests.

xllamacpp is a prebuilt llama.cpp whose Server class serves the same HTTP
API as llama-server (/health, /props, /slots, /v1/models, /metrics) from
inside this Python process. It serves on a loopback port until its stdin
closes or it is killed, and prints "ready" once it answers.

A flag left out means what it means to llama-server (common/arg.cpp): no
-c is 0 (the model's training context), no -np is -1 (auto: 4 slots
sharing one unified KV cache, tools/server/server.cpp).
"""

import argparse
import mmap
import os
import sys

import xllamacpp as x


FLASH = {"on": "ENABLED", "off": "DISABLED", "auto": "AUTO"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-c", "--ctx-size", type=int, default=0)
    ap.add_argument("-np", "--parallel", type=int, default=-1)
    ap.add_argument("-kvu", "--kv-unified", action="store_true")
    ap.add_argument("--swa-full", action="store_true")
    ap.add_argument("-ctk", "--cache-type-k")
    ap.add_argument("-ctv", "--cache-type-v")
    ap.add_argument("--no-mmap", action="store_true")
    ap.add_argument("--api-key")
    ap.add_argument("-lv", "--verbosity", type=int, default=4)
    ap.add_argument("-fa", "--flash-attn", choices=["on", "off", "auto"], default="auto")
    ap.add_argument("-b", "--batch-size", type=int)
    ap.add_argument("-ub", "--ubatch-size", type=int)
    ap.add_argument("--n-outputs-max", type=int, help="0: n_batch (llama-cli's default)")
    ap.add_argument("--no-repack", action="store_true")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--fit", choices=["on", "off"], default="on")
    ap.add_argument("--exit-after-load", action="store_true", help="load, log the buffers, exit")
    ap.add_argument("--map", help="map this file first: a file named libcuda.so.1 makes the process "
                    "look like a CUDA build to a scan of its maps (this build is the CPU one)")
    args = ap.parse_args()
    if args.map:
        with open(args.map, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # kept for the process's life

    p = x.CommonParams()
    p.model.path = args.model
    p.n_ctx = args.ctx_size
    p.n_parallel = args.parallel
    p.kv_unified = args.kv_unified
    p.swa_full = args.swa_full
    if args.cache_type_k:
        p.cache_type_k = x.ggml_type["GGML_TYPE_" + args.cache_type_k.upper()]
    if args.cache_type_v:
        p.cache_type_v = x.ggml_type["GGML_TYPE_" + args.cache_type_v.upper()]
    p.port = args.port
    p.endpoint_props = True
    p.endpoint_slots = True
    p.endpoint_metrics = True
    p.cpuparams.n_threads = 1
    p.cpuparams_batch.n_threads = 1
    p.verbosity = args.verbosity
    if args.api_key:
        p.api_keys = [args.api_key]
    p.flash_attn_type = x.llama_flash_attn_type["LLAMA_FLASH_ATTN_TYPE_" + FLASH[args.flash_attn]]
    if args.batch_size:
        p.n_batch = args.batch_size
    if args.ubatch_size:
        p.n_ubatch = args.ubatch_size
    if args.n_outputs_max is not None:
        p.n_outputs_max = args.n_outputs_max
    p.no_extra_bufts = args.no_repack
    p.warmup = not args.no_warmup
    p.fit_params = args.fit == "on"
    if args.no_mmap:
        p.load_mode = x.llama_load_mode.LLAMA_LOAD_MODE_NONE
    server = x.Server(p)
    if args.exit_after_load:
        sys.stderr.flush()
        os._exit(0)  # the server's threads would keep a normal exit waiting
    print("ready", server.listening_address, flush=True)
    sys.stdin.read()
    if args.map:
        mapped.close()


if __name__ == "__main__":
    main()
