#!/usr/bin/env python3
"""Writes a small Gemma-3-shaped model with random weights as a Hugging Face directory
(config.json with model_type gemma3_text, model.safetensors in F32, and the tokenizer.json of
another model directory), for the GUI's window-band check and screenshot. No numpy.

  gui_gemma3_model.py OUT_DIR TOKENIZER_DIR [--window 4] [--pattern 2] [--layers 4] [--seed 1]
                      [--gemma2 SOFTCAP]

Layers follow Gemma 3's rule: layer l is global when (l + 1) % pattern == 0, local (a
sliding window of W keys) otherwise. With --gemma2 C: a gemma2 model instead (no QK-norm,
layers alternating local / global, attention logits soft-capped at C). The weights are RANDOM: the patterns are not learned.
"""
import argparse
import json
import os
import random
import shutil
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--pattern", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gemma2", type=float, default=0.0, metavar="SOFTCAP")
    a = ap.parse_args()
    src = json.load(open(os.path.join(a.tokenizer_dir, "config.json")))
    V = int(src["vocab_size"])
    C, H, KV, d, I = 64, 4, 2, 16, 128
    cfg = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": V,
        "hidden_size": C,
        "intermediate_size": I,
        "num_hidden_layers": a.layers,
        "num_attention_heads": H,
        "num_key_value_heads": KV,
        "head_dim": d,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "sliding_window": a.window,
        "sliding_window_pattern": a.pattern,
        "query_pre_attn_scalar": d,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    if a.gemma2 > 0:
        cfg.update({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attn_logit_softcapping": a.gemma2,
                    "final_logit_softcapping": 30.0})
        for k in ("rope_local_base_freq", "sliding_window_pattern"):
            del cfg[k]
    rng = random.Random(a.seed)
    tensors = []  # (name, shape, std); std 0: zeros (Gemma's norms act as 1 + w)

    def add(name, shape, std):
        tensors.append((name, shape, std))

    add("model.embed_tokens.weight", [V, C], 0.5)
    for l in range(a.layers):
        p = f"model.layers.{l}."
        add(p + "input_layernorm.weight", [C], 0.0)
        add(p + "self_attn.q_proj.weight", [H * d, C], 0.3)
        add(p + "self_attn.k_proj.weight", [KV * d, C], 0.3)
        add(p + "self_attn.v_proj.weight", [KV * d, C], 0.1)
        if a.gemma2 <= 0:
            add(p + "self_attn.q_norm.weight", [d], 0.0)
            add(p + "self_attn.k_norm.weight", [d], 0.0)
        add(p + "self_attn.o_proj.weight", [C, H * d], 0.05)
        add(p + "post_attention_layernorm.weight", [C], 0.0)
        add(p + "pre_feedforward_layernorm.weight", [C], 0.0)
        add(p + "mlp.gate_proj.weight", [I, C], 0.05)
        add(p + "mlp.up_proj.weight", [I, C], 0.05)
        add(p + "mlp.down_proj.weight", [C, I], 0.05)
        add(p + "post_feedforward_layernorm.weight", [C], 0.0)
    add("model.norm.weight", [C], 0.0)

    header, blobs, at = {}, [], 0
    for name, shape, std in tensors:
        n = 1
        for s in shape:
            n *= s
        vals = [rng.gauss(0.0, std) for _ in range(n)] if std else [0.0] * n
        b = struct.pack("<%df" % n, *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    # "attnviz random …": the GUI labels the model RANDOM WEIGHTS, as for attnviz-cli random.
    header["__metadata__"] = {"format": "pt", "generator": "attnviz random seed %d (tests/gui_gemma3_model.py)" % a.seed}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    shutil.copy(os.path.join(a.tokenizer_dir, "tokenizer.json"), os.path.join(a.out, "tokenizer.json"))


if __name__ == "__main__":
    main()
