#!/usr/bin/env python3
"""Write the small GGUF fixtures in tests/data/gguf/.

They are written with the `gguf` Python package (the writer llama.cpp's own
converter uses), so the Rust reader in crates/gguf is checked against an
independent implementation. The shapes are the reference shapes of
/work/shared/reference/llamacpp-kv.md; tensors are a few tiny ones, since only
the header matters to the memory math.

    python3 -m venv .venv && .venv/bin/pip install gguf
    .venv/bin/python scripts/gguf_fixtures.py [OUT_DIR]
"""

import shutil
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFEndian, GGUFWriter

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/data/gguf"


def write(name, arch, keys, tensors, endianess=GGUFEndian.LITTLE, split_max_tensors=0, extra=None):
    """keys: {suffix: int} written as u32 `{arch}.{suffix}`; tensors: {name: ne} in f32."""
    writer = GGUFWriter(OUT / name, arch, endianess=endianess, split_max_tensors=split_max_tensors)
    writer.add_name(name.removesuffix(".gguf"))
    for suffix, value in keys.items():
        writer.add_uint32(f"{arch}.{suffix}", value)
    for key, (kind, value) in (extra or {}).items():
        getattr(writer, f"add_{kind}")(key, value)
    for tensor, ne in tensors.items():
        writer.add_tensor(tensor, np.zeros(tuple(reversed(ne)), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


NORMS = {"output_norm.weight": [64], "blk.0.attn_norm.weight": [64]}

QWEN3 = dict(
    block_count=28,
    context_length=40960,
    embedding_length=1024,
    **{
        "attention.head_count": 16,
        "attention.head_count_kv": 8,
        "attention.key_length": 128,
        "attention.value_length": 128,
    },
)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    ftype_f32 = {"general.file_type": ("uint32", 0)}
    write("qwen3-0.6b-shape.gguf", "qwen3", QWEN3, NORMS, extra=ftype_f32)
    write("qwen3-0.6b-shape-be.gguf", "qwen3", QWEN3, NORMS, endianess=GGUFEndian.BIG, extra=ftype_f32)
    write(
        "gemma3-4b-shape.gguf",
        "gemma3",
        {
            "block_count": 34,
            "context_length": 131072,
            "embedding_length": 2560,
            "attention.head_count": 8,
            "attention.head_count_kv": 4,
            "attention.key_length": 256,
            "attention.value_length": 256,
            "attention.sliding_window": 1024,
        },
        NORMS,
    )
    write(
        "gpt-oss-20b-shape.gguf",
        "gpt-oss",
        {
            "block_count": 24,
            "context_length": 131072,
            "embedding_length": 2880,
            "attention.head_count": 64,
            "attention.head_count_kv": 8,
            "attention.key_length": 64,
            "attention.value_length": 64,
            "attention.sliding_window": 128,
        },
        NORMS,
    )
    write(
        "deepseek-v2-lite-shape.gguf",
        "deepseek2",
        {
            "block_count": 27,
            "context_length": 163840,
            "embedding_length": 2048,
            "attention.head_count": 16,
            "attention.head_count_kv": 1,
            "attention.key_length": 576,
            "attention.value_length": 512,
            "attention.key_length_mla": 192,
            "attention.value_length_mla": 128,
            "attention.kv_lora_rank": 512,
            "rope.dimension_count": 64,
        },
        NORMS,
    )
    write(
        "mamba-130m-shape.gguf",
        "mamba",
        {
            "block_count": 24,
            "context_length": 1048576,
            "embedding_length": 768,
            "ssm.conv_kernel": 4,
            "ssm.inner_size": 1536,
            "ssm.state_size": 16,
            "ssm.time_step_rank": 48,
        },
        NORMS,
    )
    write(
        "bert-embedding-shape.gguf",
        "bert",
        {
            "block_count": 12,
            "context_length": 512,
            "embedding_length": 384,
            "attention.head_count": 12,
            "pooling_type": 1,
        },
        NORMS,
        extra={"bert.attention.causal": ("bool", False)},
    )
    # gguf-split naming and split.* keys: one tensor per part.
    write("tiny-split.gguf", "qwen3", QWEN3, NORMS, split_max_tensors=1)
    # An Ollama blob: no extension.
    blob = OUT / "sha256-0f0e2b4c1d7a9e8f3b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a"
    shutil.copyfile(OUT / "qwen3-0.6b-shape.gguf", blob)


if __name__ == "__main__":
    main()
