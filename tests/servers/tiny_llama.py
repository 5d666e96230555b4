"""Writes a tiny Llama-shaped model folder for vLLM, made here, nothing
downloaded: config.json (2 layers, 4 attention heads, 2 KV heads of 32: vLLM's CPU attention
takes head sizes of 32 and up, vllm/v1/attention/backends/cpu_attn.py
get_supported_head_sizes),
random weights in model.safetensors and a word-level tokenizer.

Usage: tiny_llama.py FOLDER [DTYPE]   (DTYPE: float32 (default) or bfloat16)
"""
import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


def main(folder, dtype="float32"):
    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(253)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(folder, safe_serialization=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
