#!/usr/bin/python3
"""Small ONNX models for the importer's tests, exported with Debian's python3-torch (random
weights, fixed seed), with their inputs and PyTorch's outputs as .npy (the golden values).

  /usr/bin/python3 scripts/make_onnx_test_models.py tests/onnx/models

Each model NAME gives NAME.onnx, NAME.input.npy, NAME.output.npy. The files are a few KB each
and are committed, so the tests need neither torch nor ONNX Runtime."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_model import Bert, EncoderLayer  # noqa: E402

out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/onnx/models"
os.makedirs(out_dir, exist_ok=True)


class SqueezeExcite(nn.Module):
    def __init__(self, c, s):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, s, 1), nn.Conv2d(s, c, 1)

    def forward(self, x):
        g = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(g))))


class SmallCnn(nn.Module):
    """Conv-BN-ReLU, depthwise + hardswish, squeeze-excite, 1x1 with residual, pools, linear."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8)
        self.dw, self.b2 = nn.Conv2d(8, 8, 5, padding=2, groups=8, bias=False), nn.BatchNorm2d(8)
        self.se = SqueezeExcite(8, 4)
        self.pw = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        z = F.hardswish(self.b2(self.dw(y)))
        z = self.pw(self.se(z)) + y
        z = F.max_pool2d(z, 3, stride=2, padding=1)
        z = F.avg_pool2d(z, 2, ceil_mode=True, count_include_pad=False)
        return torch.softmax(self.fc(torch.flatten(F.adaptive_avg_pool2d(z, 1), 1)), dim=1)


class Mlp(nn.Module):
    """Linear, erf GELU, LayerNorm, scalar arithmetic, tanh GELU."""

    def __init__(self):
        super().__init__()
        self.l1, self.ln, self.l2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 8)

    def forward(self, x):
        h = self.ln(F.gelu(self.l1(x)))
        h = (h - 0.25) * 2.0 / 3.0
        return F.gelu(self.l2(h), approximate="tanh")


class Conv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.b = nn.Conv1d(4, 6, 3, padding=1, dilation=1), nn.BatchNorm1d(6)
        self.fc = nn.Linear(6 * 5, 3)

    def forward(self, x):
        y = F.max_pool1d(F.relu(self.b(self.c(x))), 2)
        return self.fc(torch.flatten(y, 1))


class Decomposed(nn.Module):
    """Hand-written activations as exporters see them: x * relu6(x + 3) / 6, x * sigmoid(x),
    concat of two branches, a matmul with [in, out] weights, a reshape via Shape/Gather."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(4, 6, 3, padding=1), nn.Conv2d(4, 2, 1)
        self.w = nn.Parameter(torch.randn(8 * 6 * 6, 5) * 0.05)

    def forward(self, x):
        a = self.a(x)
        a = a * F.relu6(a + 3) / 6
        b = self.b(x)
        b = b * torch.sigmoid(b)
        y = torch.cat([a, b], dim=1)
        y = y.reshape(x.shape[0], -1)
        return torch.matmul(y, self.w).clamp(-1.0, 1.0)


class Upsampling(nn.Module):
    """A U-Net's decoder steps: transposed convs (stride 2, and stride 3 with padding, groups and
    output padding), bilinear and nearest interpolation, skip concat."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 2, stride=2)
        self.up3 = nn.ConvTranspose2d(6, 4, 3, stride=3, padding=1, output_padding=1, groups=2)
        self.mix = nn.Conv2d(10, 3, 3, padding=1)

    def forward(self, x):
        u = F.relu(self.up(x))                                     # 2x
        b = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        n = F.interpolate(x, scale_factor=2.0, mode="nearest")
        y = self.mix(torch.cat([u, b + n], 1))
        t = self.up3(u)                                            # 3x, output padding
        r = F.interpolate(y, size=(t.shape[2], t.shape[3]), mode="bilinear", align_corners=True)
        return torch.cat([t, r], 1)


class LayerNormOpset12(nn.Module):
    """LayerNorm exported before opset 17: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
    Mul, Add (the importer's layer_norm pattern)."""

    def __init__(self):
        super().__init__()
        self.fc, self.ln = nn.Linear(12, 16), nn.LayerNorm(16, eps=1e-6)
        self.ln.weight.data.uniform_(0.5, 1.5)
        self.ln.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(F.relu(self.fc(x)))


class Encoder(nn.Module):
    """Two encoder layers on token embeddings [batch, sequence, 32], 2 heads of 16."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(32, 2, 64) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def export_bert(name):
    torch.manual_seed(2026)
    m = Bert(vocab=50, hidden=32, heads=2, ffn=64, layers=2, max_pos=16).eval()
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0  # the second sequence is padded
    with torch.no_grad():
        hidden, pooled = m(ids, mask)
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(m, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                      output_names=["hidden", "pooled"], opset_version=17,
                      do_constant_folding=True)
    np.save(os.path.join(out_dir, name + ".input_ids.npy"), ids.numpy())
    np.save(os.path.join(out_dir, name + ".attention_mask.npy"), mask.numpy())
    np.save(os.path.join(out_dir, name + ".hidden.npy"), hidden.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, name + ".pooled.npy"), pooled.numpy().astype(np.float32))
    print(name, os.path.getsize(path), "bytes")


class BatchCentered(nn.Module):
    """Subtracts the batch mean (mixes samples along axis 0), then a linear layer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x - x.mean(dim=0, keepdim=True))


def channel_shuffle(x, groups):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class ShuffleUnits(nn.Module):
    """ShuffleNet v2 units as torchvision writes them (a stride-2 unit, a stride-1 unit with
    chunk), a 4-group shuffle and a Split into uneven channel runs."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1, groups=16), nn.Conv2d(16, 8, 1),
                                nn.ReLU())
        self.b2 = nn.Sequential(nn.Conv2d(16, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1, groups=8),
                                nn.Conv2d(8, 8, 1), nn.ReLU())
        self.b3 = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1, groups=8),
                                nn.Conv2d(8, 8, 1), nn.ReLU())
        self.head = nn.Conv2d(8, 6, 1)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = channel_shuffle(torch.cat((self.b1(x), self.b2(x)), 1), 2)
        x1, x2 = x.chunk(2, dim=1)
        x = channel_shuffle(torch.cat((x1, self.b3(x2)), 1), 2)
        a, b, c = torch.split(channel_shuffle(x, 4), [4, 4, 8], dim=1)
        return torch.cat((a * 2, b, self.head(c)), 1)


class ConvNextBlocks(nn.Module):
    """ConvNeXt as torchvision writes it: a patchify stem with a channels-last LayerNorm
    (permute, layer norm, permute back), blocks of a 7x7 depthwise conv, a permute to
    [N, H, W, C], layer norm, two linears with GELU, a layer scale and the permute back before
    the residual add, and a downsampling layer."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 2, 2)
        self.stem_norm = nn.LayerNorm(16)
        self.blocks = nn.ModuleList([self.block(16), self.block(16)])
        self.down_norm = nn.LayerNorm(16)
        self.down = nn.Conv2d(16, 24, 2, 2)
        self.last = self.block(24)

    @staticmethod
    def block(c):
        return nn.ModuleDict({"dw": nn.Conv2d(c, c, 7, padding=3, groups=c), "norm": nn.LayerNorm(c),
                              "fc1": nn.Linear(c, 4 * c), "fc2": nn.Linear(4 * c, c)})

    @staticmethod
    def run(b, x, scale):
        y = b["dw"](x).permute(0, 2, 3, 1)
        y = b["fc2"](F.gelu(b["fc1"](b["norm"](y))))
        return x + (scale * y).permute(0, 3, 1, 2)

    def forward(self, x):
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        for b in self.blocks:
            x = self.run(b, x, 0.5)
        x = self.down(self.down_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))
        return self.run(self.last, x, 0.25)


# Models whose axis 0 is the symbolic dimension "batch" (kfuse-run's --split tests).
DYNAMIC_BATCH = {"small_cnn_dyn_b4", "batch_centered_dyn_b4"}

MODELS = {
    "small_cnn_b1": (SmallCnn, (1, 3, 24, 24)),
    "mlp_b3": (Mlp, (3, 16)),
    "conv1d_b2": (Conv1d, (2, 4, 10)),
    "decomposed_b2": (Decomposed, (2, 4, 6, 6)),
    "upsampling_b2": (Upsampling, (2, 4, 5, 7)),
    "layernorm_op12_b2": (LayerNormOpset12, (2, 3, 12)),
    "encoder_b2": (Encoder, (2, 9, 32)),
    "shuffle_units_b2": (ShuffleUnits, (2, 3, 12, 12)),
    "convnext_blocks_b2": (ConvNextBlocks, (2, 3, 16, 16)),
    "small_cnn_dyn_b4": (SmallCnn, (4, 3, 24, 24)),
    "batch_centered_dyn_b4": (BatchCentered, (4, 8)),
}

for name, (cls, shape) in MODELS.items():
    torch.manual_seed(2026)
    m = cls().eval()
    for mod in m.modules():  # non-trivial batch-norm statistics
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.5, 0.5)
    x = torch.randn(*shape)
    with torch.no_grad():
        y = m(x)
    path = os.path.join(out_dir, name + ".onnx")
    opset = 12 if name.endswith("_op12_b2") else 17
    dynamic = {"x": {0: "batch"}, "y": {0: "batch"}} if name in DYNAMIC_BATCH else None
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=opset,
                      do_constant_folding=True, dynamic_axes=dynamic)
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, name + ".output.npy"), y.numpy().astype(np.float32))
    print(name, os.path.getsize(path), "bytes")

export_bert("bert_tiny_b2")
