"""Write a GGUF with a real model's full tensor shapes and its data left as a hole.

    shape_model.py NAME OUT.gguf

The header (metadata, every tensor's name, shape and type) is written with
the `gguf` package, the writer llama.cpp's own converter uses; the tensor
data section is then extended with ftruncate, so the file is sparse: a
shape of 1 GiB takes a few KiB of disk and llama.cpp loads it in a second.
The weights are all zero, which is enough for what the tests read: the
buffers llama.cpp reserves for the shapes (weights, KV cache, compute and
output buffers). Matrices are Q4_0 (load the file with --no-repack so the
CPU backend maps them instead of copying them into a repacked buffer);
norms are F32, as the converter writes them.

The shapes are the published configurations of the named models
(config.json on their model cards), with the tensor names of llama.cpp's
src/llama-arch.cpp (LLM_TENSOR_NAMES) that src/llama-model.cpp loads.
"""

import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES


def spec(arch, n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, ctx, **extra):
    return dict(arch=arch, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
                head_dim=head_dim, n_ff=n_ff, n_vocab=n_vocab, ctx=ctx, **extra)


SHAPES = {
    # Qwen/Qwen3-0.6B: tied embeddings, q/k norms.
    "qwen3-0.6b": spec("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, 40960, qk_norm=True, tied=True),
    # meta-llama/Llama-3.2-1B: tied embeddings, head size 64.
    "llama-3.2-1b": spec("llama", 16, 2048, 32, 8, 64, 8192, 128256, 131072, tied=True),
    # TinyLlama/TinyLlama-1.1B: an output matrix of its own, 4 KV heads.
    "tinyllama-1.1b": spec("llama", 22, 2048, 32, 4, 64, 5632, 32000, 2048, tied=False),
    # google/gemma-3-1b-pt: sliding window 512 on 5 of every 6 layers, head size 256.
    "gemma3-1b": spec("gemma3", 26, 1152, 4, 1, 256, 6912, 262144, 32768, qk_norm=True, tied=True,
                      gemma=True, sliding_window=512),
    # ibm-granite/granite-3.1-1b-a400m-instruct: 32 experts, 8 used per token, expert FFN 512.
    "granitemoe-1b-a400m": spec("granitemoe", 24, 1024, 16, 8, 64, 512, 49155, 131072, tied=True,
                                n_expert=32, n_expert_used=8, n_ff_exp=512,
                                floats={"logit_scale": 6.0, "residual_scale": 0.22, "embedding_scale": 12.0,
                                        "attention.scale": 0.015625}),
}


def tensors(s):
    """(name, ne) of every tensor, ne[0] first, as llama.cpp reads them."""
    e, hd = s["n_embd"], s["head_dim"]
    out = [("token_embd.weight", [e, s["n_vocab"]]), ("output_norm.weight", [e])]
    if not s["tied"]:
        out.append(("output.weight", [e, s["n_vocab"]]))
    for il in range(s["n_layer"]):
        b = f"blk.{il}."
        out += [
            (b + "attn_norm.weight", [e]),
            (b + "attn_q.weight", [e, s["n_head"] * hd]),
            (b + "attn_k.weight", [e, s["n_head_kv"] * hd]),
            (b + "attn_v.weight", [e, s["n_head_kv"] * hd]),
            (b + "attn_output.weight", [s["n_head"] * hd, e]),
            (b + "ffn_norm.weight", [e]),
        ]
        if s.get("qk_norm"):
            out += [(b + "attn_q_norm.weight", [hd]), (b + "attn_k_norm.weight", [hd])]
        if s.get("gemma"):
            out += [(b + "post_attention_norm.weight", [e]), (b + "post_ffw_norm.weight", [e])]
        if "n_expert" in s:
            n, f = s["n_expert"], s["n_ff_exp"]
            out += [
                (b + "ffn_gate_inp.weight", [e, n]),
                (b + "ffn_gate_exps.weight", [e, f, n]),
                (b + "ffn_up_exps.weight", [e, f, n]),
                (b + "ffn_down_exps.weight", [f, e, n]),
            ]
        else:
            out += [
                (b + "ffn_gate.weight", [e, s["n_ff"]]),
                (b + "ffn_up.weight", [e, s["n_ff"]]),
                (b + "ffn_down.weight", [s["n_ff"], e]),
            ]
    return out


def write(name, path):
    s = SHAPES[name]
    arch = s["arch"]
    w = GGUFWriter(path, arch)
    w.add_name(name)
    w.add_uint32("general.file_type", 2)  # Q4_0
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_head_kv"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    if "sliding_window" in s:
        w.add_sliding_window(s["sliding_window"])
    if "n_expert" in s:
        w.add_expert_count(s["n_expert"])
        w.add_expert_used_count(s["n_expert_used"])
        w.add_expert_feed_forward_length(s["n_ff_exp"])
    for key, value in s.get("floats", {}).items():
        w.add_float32(f"{arch}.{key}", value)
    # A SentencePiece vocabulary of the model's size: n_vocab comes from it.
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(3, s["n_vocab"])])
    w.add_token_scores([0.0] * s["n_vocab"])
    w.add_token_types([2, 3, 3] + [1] * (s["n_vocab"] - 3))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    data = 0
    for tname, ne in tensors(s):
        kind = T.F32 if len(ne) == 1 else T.Q4_0
        block, size = GGML_QUANT_SIZES[kind]
        nbytes = int(np.prod(ne)) // block * size
        w.add_tensor_info(tname, list(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=kind)
        data += -(-nbytes // 32) * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as f:
        f.seek(0, 2)
        start = -(-f.tell() // 32) * 32
        f.truncate(start + data)


if __name__ == "__main__":
    write(sys.argv[1], sys.argv[2])
