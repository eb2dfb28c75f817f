#!/usr/bin/env python3
"""Independent float64 NumPy implementation of all-MiniLM-L6-v2 (BERT).

It shares nothing with candle: the weights are read from the same
`model.safetensors` with the `safetensors` package, the token ids come from the
shipped `tokenizer.json` through the Python `tokenizers` package, and the whole
forward pass (embeddings, 6 encoder layers, exact-erf GELU, mean pooling over
the attention mask, L2 norm) is written out here in float64.

Run once:

    pip install numpy safetensors tokenizers
    python3 minilm_reference.py <model-dir> > ../fixtures/minilm_reference.json

The Rust test `tests/embedder.rs` asserts that candle matches these vectors to
1e-3 (in practice ~1e-7).
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "The cat sits on the mat",
    "A cat is sitting on a mat",
    "Stock markets fell sharply",
    "Ünïcode, digits 12345 and code: fn main() { println!(\"hi\"); }",
]


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def linear(x, p, name):
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def embed(ids, p, cfg):
    n = len(ids)
    heads = cfg["num_attention_heads"]
    hidden = cfg["hidden_size"]
    hd = hidden // heads
    eps = cfg["layer_norm_eps"]
    x = (
        p["embeddings.word_embeddings.weight"][ids]
        + p["embeddings.position_embeddings.weight"][:n]
        + p["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"], eps)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{i}."
        q = linear(x, p, pre + "attention.self.query").reshape(n, heads, hd).transpose(1, 0, 2)
        k = linear(x, p, pre + "attention.self.key").reshape(n, heads, hd).transpose(1, 0, 2)
        v = linear(x, p, pre + "attention.self.value").reshape(n, heads, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = s - s.max(axis=-1, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(axis=-1, keepdims=True)
        ctx = (a @ v).transpose(1, 0, 2).reshape(n, hidden)
        x = layer_norm(
            linear(ctx, p, pre + "attention.output.dense") + x,
            p[pre + "attention.output.LayerNorm.weight"],
            p[pre + "attention.output.LayerNorm.bias"],
            eps,
        )
        h = gelu(linear(x, p, pre + "intermediate.dense"))
        x = layer_norm(
            linear(h, p, pre + "output.dense") + x,
            p[pre + "output.LayerNorm.weight"],
            p[pre + "output.LayerNorm.bias"],
            eps,
        )
    # One unpadded sentence: mean pooling over the mask is the plain mean.
    v = x.mean(axis=0)
    return v / np.linalg.norm(v)


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(f"{model_dir}/config.json"))
    params = {k: v.astype(np.float64) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.no_padding()
    out = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        v = embed(np.array(ids), params, cfg)
        out.append({"text": s, "ids": ids, "vector": [float(f) for f in v]})
    json.dump({"model": "all-MiniLM-L6-v2", "dtype": "float64", "items": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
