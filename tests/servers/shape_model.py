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
    # deepseek-ai/DeepSeek-V2-Lite: multi-head latent attention (kv_lora_rank 512, no q LoRA,
    # nope 128 + rope 64 per head, V 128), 64 routed experts of 1408 (6 used) beside 2 shared,
    # the first layer dense. Written as convert_hf_to_gguf.py writes MLA models: one KV head
    # of K = 512 + 64 and V = 512, the MLA head sizes apart, wkv_b split into k_b and v_b.
    "deepseek2-lite": spec("deepseek2", 27, 2048, 16, 1, 576, 10944, 102400, 163840, tied=False,
                           mla=dict(rank=512, nope=128, rope=64, v=128),
                           n_expert=64, n_expert_used=6, n_ff_exp=1408, n_expert_shared=2, dense_lead=1),
    # state-spaces/mamba-130m: 24 Mamba-1 layers, d_inner 1536, d_state 16, d_conv 4, dt_rank 48.
    "mamba-130m": spec("mamba", 24, 768, 0, 0, 0, 0, 50280, 1048576, tied=True,
                       ssm=dict(d_inner=1536, d_state=16, d_conv=4, dt_rank=48)),
    # state-spaces/mamba2-130m: 24 Mamba-2 layers, d_inner 1536 in 24 heads of 64, d_state 128,
    # one group.
    "mamba2-130m": spec("mamba2", 24, 768, 0, 0, 0, 0, 50288, 1048576, tied=True,
                        ssm=dict(d_inner=1536, d_state=128, d_conv=4, dt_rank=24, n_group=1)),
    # ibm-granite/granite-4.0-h-tiny (its GGUF's keys): 40 layers, Mamba-2 (d_inner 3072 in 48
    # heads, d_state 128) but for attention (12 heads, 4 KV, of 128, no RoPE) at layers 5, 15,
    # 25 and 35; in every layer 64 experts of 512 (6 used) beside a shared one of 1024.
    "granite-4.0-h-tiny": spec("granitehybrid", 40, 1536, 12, 4, 128, 512, 100352, 1048576, tied=True,
                               ssm=dict(d_inner=3072, d_state=128, d_conv=4, dt_rank=48, n_group=1),
                               attention_layers=[5, 15, 25, 35],
                               n_expert=64, n_expert_used=6, n_ff_exp=512, n_ff_shexp=1024,
                               floats={"logit_scale": 6.0, "residual_scale": 0.22, "embedding_scale": 12.0,
                                       "attention.scale": 0.0078125}),
}


def tensors(s):
    """(name, ne) of every tensor, ne[0] first, as llama.cpp reads them."""
    e, hd = s["n_embd"], s["head_dim"]
    out = [("token_embd.weight", [e, s["n_vocab"]]), ("output_norm.weight", [e])]
    if not s["tied"]:
        out.append(("output.weight", [e, s["n_vocab"]]))
    for il in range(s["n_layer"]):
        b = f"blk.{il}."
        if "attention_layers" in s:
            out += hybrid_layer(b, s, il)
            continue
        if "ssm" in s:
            out += mamba_layer(b, s)
            continue
        if "mla" in s:
            out += mla_layer(b, s, il)
            continue
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
            out += experts(b, e, s["n_expert"], s["n_ff_exp"], 0)
        else:
            out += [
                (b + "ffn_gate.weight", [e, s["n_ff"]]),
                (b + "ffn_up.weight", [e, s["n_ff"]]),
                (b + "ffn_down.weight", [s["n_ff"], e]),
            ]
    return out


def mamba_layer(b, s):
    """src/llama-model.cpp LLM_ARCH_MAMBA: the in/x/dt/out projections and the scan's A, D;
    LLM_ARCH_MAMBA2 (n_group given): x, z, B, C and dt from one projection, one dt per head."""
    e, m = s["n_embd"], s["ssm"]
    d_inner, d_state, dt_rank = m["d_inner"], m["d_state"], m["dt_rank"]
    if "n_group" in m:
        g, n_head = m["n_group"], dt_rank
        xbc = d_inner + 2 * g * d_state
        return [
            (b + "attn_norm.weight", [e]),
            (b + "ssm_in.weight", [e, 2 * d_inner + 2 * g * d_state + n_head]),
            (b + "ssm_conv1d.weight", [m["d_conv"], xbc]),
            (b + "ssm_conv1d.bias", [xbc]),
            (b + "ssm_dt.bias", [n_head]),
            (b + "ssm_a", [1, n_head]),
            (b + "ssm_d", [1, n_head]),
            (b + "ssm_norm.weight", [d_inner // g, g]),
            (b + "ssm_out.weight", [d_inner, e]),
        ]
    return [
        (b + "attn_norm.weight", [e]),
        (b + "ssm_in.weight", [e, 2 * d_inner]),
        (b + "ssm_conv1d.weight", [m["d_conv"], d_inner]),
        (b + "ssm_conv1d.bias", [d_inner]),
        (b + "ssm_x.weight", [d_inner, dt_rank + 2 * d_state]),
        (b + "ssm_dt.weight", [dt_rank, d_inner]),
        (b + "ssm_dt.bias", [d_inner]),
        (b + "ssm_a", [d_state, d_inner]),
        (b + "ssm_d", [d_inner]),
        (b + "ssm_out.weight", [d_inner, e]),
    ]


def hybrid_layer(b, s, il):
    """src/llama-model.cpp LLM_ARCH_GRANITE_HYBRID: a Mamba-2 or an attention block, then the
    experts beside the shared one."""
    e, hd = s["n_embd"], s["head_dim"]
    if il in s["attention_layers"]:
        mixer = [
            (b + "attn_norm.weight", [e]),
            (b + "attn_q.weight", [e, s["n_head"] * hd]),
            (b + "attn_k.weight", [e, s["n_head_kv"] * hd]),
            (b + "attn_v.weight", [e, s["n_head_kv"] * hd]),
            (b + "attn_output.weight", [s["n_head"] * hd, e]),
        ]
    else:
        mixer = mamba_layer(b, s)
    return mixer + [(b + "ffn_norm.weight", [e])] + experts(b, e, s["n_expert"], s["n_ff_exp"], s["n_ff_shexp"])


def experts(b, e, n, f, shared):
    """n routed experts of f, and a shared FFN of `shared` where it is not 0."""
    out = [
        (b + "ffn_gate_inp.weight", [e, n]),
        (b + "ffn_gate_exps.weight", [e, f, n]),
        (b + "ffn_up_exps.weight", [e, f, n]),
        (b + "ffn_down_exps.weight", [f, e, n]),
    ]
    if shared:
        out += [
            (b + "ffn_gate_shexp.weight", [e, shared]),
            (b + "ffn_up_shexp.weight", [e, shared]),
            (b + "ffn_down_shexp.weight", [shared, e]),
        ]
    return out


def mla_layer(b, s, il):
    """src/llama-model.cpp LLM_ARCH_DEEPSEEK2: q through a LoRA (q_rank) or, in the Lite
    models, one matrix."""
    e, h, m = s["n_embd"], s["n_head"], s["mla"]
    q_width = h * (m["nope"] + m["rope"])
    if "q_rank" in m:
        q = [
            (b + "attn_q_a.weight", [e, m["q_rank"]]),
            (b + "attn_q_a_norm.weight", [m["q_rank"]]),
            (b + "attn_q_b.weight", [m["q_rank"], q_width]),
        ]
    else:
        q = [(b + "attn_q.weight", [e, q_width])]
    out = [(b + "attn_norm.weight", [e])] + q + [
        (b + "attn_kv_a_mqa.weight", [e, m["rank"] + m["rope"]]),
        (b + "attn_kv_a_norm.weight", [m["rank"]]),
        (b + "attn_k_b.weight", [m["nope"], m["rank"], h]),
        (b + "attn_v_b.weight", [m["rank"], m["v"], h]),
        (b + "attn_output.weight", [h * m["v"], e]),
        (b + "ffn_norm.weight", [e]),
    ]
    if il < s["dense_lead"]:
        return out + [
            (b + "ffn_gate.weight", [e, s["n_ff"]]),
            (b + "ffn_up.weight", [e, s["n_ff"]]),
            (b + "ffn_down.weight", [s["n_ff"], e]),
        ]
    f = s["n_ff_exp"]
    return out + experts(b, e, s["n_expert"], f, f * s["n_expert_shared"])


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
    if "attention_layers" in s:
        # A layer is recurrent where its KV head count is 0.
        w.add_head_count_kv([s["n_head_kv"] if il in s["attention_layers"] else 0 for il in range(s["n_layer"])])
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
        w.add_rope_scaling_finetuned(False)
        w.add_expert_shared_feed_forward_length(s["n_ff_shexp"])
    else:
        w.add_head_count_kv(s["n_head_kv"])
    w.add_layer_norm_rms_eps(1e-6)
    if "ssm" in s:
        m = s["ssm"]
        w.add_ssm_conv_kernel(m["d_conv"])
        w.add_ssm_inner_size(m["d_inner"])
        w.add_ssm_state_size(m["d_state"])
        w.add_ssm_time_step_rank(m["dt_rank"])
        if "n_group" in m:
            w.add_ssm_group_count(m["n_group"])
    elif "mla" in s:
        m = s["mla"]
        w.add_key_length(m["rank"] + m["rope"])
        w.add_value_length(m["rank"])
        w.add_uint32(f"{arch}.attention.key_length_mla", m["nope"] + m["rope"])
        w.add_uint32(f"{arch}.attention.value_length_mla", m["v"])
        w.add_kv_lora_rank(m["rank"])
        if "q_rank" in m:
            w.add_q_lora_rank(m["q_rank"])
        w.add_rope_dimension_count(m["rope"])
        w.add_leading_dense_block_count(s["dense_lead"])
        w.add_expert_shared_count(s["n_expert_shared"])
        w.add_expert_weights_scale(1.0)
        w.add_rope_freq_base(1e4)
    else:
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
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
        # Q4_0 rows are blocks of 32; narrower matrices (mamba's dt, conv and A) and
        # norms stay F32.
        kind = T.Q4_0 if len(ne) > 1 and ne[0] % 32 == 0 and "norm" not in tname else T.F32
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
