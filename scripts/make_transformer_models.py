#!/usr/bin/python3
"""Transformer encoders for kfuse's benchmarks, exported with Debian's python3-torch (random
weights, fixed seed; nothing downloaded), with dynamic "batch" and "sequence" dimensions.

  /usr/bin/python3 scripts/make_transformer_models.py OUT_DIR [name ...]

  minilm_l6.onnx   MiniLM-L6-shaped BERT: hidden 384, 12 heads, FFN 1536, 6 layers
  bert_base.onnx   BERT-base-shaped: hidden 768, 12 heads, FFN 3072, 12 layers
  bert_layer.onnx  one BERT-base encoder layer (with the embeddings and the pooler, which are
                   ~1% of its time): the "one encoder layer" row of the benchmark
Inputs input_ids and attention_mask (int64), outputs hidden and pooled. Each model also gets
MODEL.s<S>.b<B>.input_ids.npy / .attention_mask.npy for S in 128, 384 and B in 1, 8 (ids from a
fixed seed, the last eighth of every second sequence padded) and MODEL.s128.b1.hidden.npy /
.pooled.npy (PyTorch's outputs). Files present are kept (delete OUT_DIR to rebuild)."""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_model import Bert  # noqa: E402

out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/models"
os.makedirs(out_dir, exist_ok=True)
SHAPES = {
    "minilm_l6": dict(hidden=384, heads=12, ffn=1536, layers=6),
    "bert_base": dict(hidden=768, heads=12, ffn=3072, layers=12),
    "bert_layer": dict(hidden=768, heads=12, ffn=3072, layers=1),
}


def inputs(seq, batch):
    rng = np.random.default_rng(seq * 10 + batch)
    ids = rng.integers(0, 30522, size=(batch, seq), dtype=np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[1::2, seq - seq // 8:] = 0
    return ids, mask


for name in sys.argv[2:] or list(SHAPES):
    path = os.path.join(out_dir, name + ".onnx")
    if not os.path.exists(path):
        torch.manual_seed(2026)
        m = Bert(**SHAPES[name]).eval()
        ids, mask = inputs(128, 1)
        with torch.no_grad():
            hidden, pooled = m(torch.from_numpy(ids), torch.from_numpy(mask))
        dyn = {"batch": 0, "sequence": 1}
        torch.onnx.export(m, (torch.from_numpy(ids), torch.from_numpy(mask)), path,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["hidden", "pooled"], opset_version=17,
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "hidden": {0: "batch", 1: "sequence"},
                                        "pooled": {0: "batch"}})
        np.save(os.path.join(out_dir, f"{name}.s128.b1.hidden.npy"), hidden.numpy())
        np.save(os.path.join(out_dir, f"{name}.s128.b1.pooled.npy"), pooled.numpy())
        print(name, os.path.getsize(path) // 1024, "KiB")
    for seq in (128, 384):
        for batch in (1, 8):
            ids, mask = inputs(seq, batch)
            np.save(os.path.join(out_dir, f"{name}.s{seq}.b{batch}.input_ids.npy"), ids)
            np.save(os.path.join(out_dir, f"{name}.s{seq}.b{batch}.attention_mask.npy"), mask)
