"""The BERT-style encoder kfuse's transformer tests and benchmarks export (random weights):
written as PyTorch users and Hugging Face write it, so the ONNX export has the usual pattern
(view + transpose heads, Q.K^T / sqrt(d), additive mask, softmax, .V, erf GELU, LayerNorm)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class EncoderLayer(nn.Module):
    """A BERT-style post-norm encoder layer written as PyTorch users write it: Q/K/V linears,
    heads split by view + transpose, Q.K^T / sqrt(d), softmax, .V, output projection, residual
    + LayerNorm, GELU (erf) feed-forward, residual + LayerNorm."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o, self.ln1 = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.f1, self.f2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def split(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.h, self.d).transpose(1, 2)

    def forward(self, x, mask=None):
        b, s, c = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2) / self.d ** 0.5
        if mask is not None:
            scores = scores + mask
        p = torch.softmax(scores, dim=-1)
        a = (p @ v).transpose(1, 2).reshape(b, s, c)
        x = self.ln1(x + self.o(a))
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class Bert(nn.Module):
    """BERT as Hugging Face writes it: token ids and an attention mask (int64) in; word, position
    and token-type embeddings, LayerNorm, masked post-norm encoder layers; the hidden states and
    the pooled first token (tanh of a linear) out."""

    def __init__(self, vocab=30522, hidden=768, heads=12, ffn=3072, layers=12, max_pos=512):
        super().__init__()
        self.word, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s).unsqueeze(0)
        x = self.word(input_ids) + self.pos(pos) + self.token_type(torch.zeros_like(input_ids))
        x = self.ln(x)
        mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))
