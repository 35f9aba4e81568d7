#!/usr/bin/python3
"""Exports the benchmark models to ONNX with Debian's python3-torch (random weights, fixed seed):
the same architectures as examples/04_models/models.hpp builds with kfuse's graph API.

  /usr/bin/python3 scripts/make_models.py OUT_DIR

  mlp_b1.onnx, mlp_b64.onnx  MLP 784-1024-1024-10, ReLU, softmax
  block_b1.onnx, block_b8.onnx  ResNet basic block, 64 channels, 56x56 (conv-BN-ReLU, conv-BN,
                             +x, ReLU, global average pool, linear to 10)
  mobile_b1.onnx             the MobileNetV3-style small CNN (3x224x224)
  tiny.onnx                  x + 1 on one float: ONNX Runtime's per-call overhead
Weights differ from kfuse's (another generator); shapes and ops are the same, which is what the
timing compares. Files are skipped when present (delete OUT_DIR to rebuild)."""
import os
import sys

import torch
import torch.nn as nn

torch.manual_seed(2026)
out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/models"
os.makedirs(out_dir, exist_ok=True)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        return torch.softmax(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x))))), dim=-1)


class Block(nn.Module):
    def __init__(self, c=64):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


# (expand, out, kernel, stride, squeeze, hardswish): models.hpp mobile_weights::blocks
BLOCKS = [(16, 16, 3, 2, 8, False), (72, 24, 3, 2, 0, False), (88, 24, 3, 1, 0, False),
          (96, 40, 5, 2, 24, True), (240, 40, 5, 1, 64, True), (120, 48, 5, 2, 32, True)]


class SE(nn.Module):
    def __init__(self, c, s):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(c, s), nn.Linear(s, c)

    def forward(self, x):
        s = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        s = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s[:, :, None, None]


class Inverted(nn.Module):
    def __init__(self, c, e, o, k, s, sq, hs):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers = []
        if e != c:
            layers += [nn.Conv2d(c, e, 1), act()]
        layers += [nn.Conv2d(e, e, k, s, k // 2, groups=e), act()]
        if sq:
            layers += [SE(e, sq)]
        layers += [nn.Conv2d(e, o, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = s == 1 and c == o

    def forward(self, x):
        y = self.body(x)
        return y + x if self.residual else y


class Mobile(nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [nn.Conv2d(3, 16, 3, 2, 1), nn.Hardswish()], 16
        for e, o, k, s, sq, hs in BLOCKS:
            layers.append(Inverted(c, e, o, k, s, sq, hs))
            c = o
        layers += [nn.Conv2d(c, 288, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(288, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


def export(name, net, shape):
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        return
    net.eval()
    for m in net.modules():  # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    with torch.no_grad():
        torch.onnx.export(net, torch.randn(*shape), path, input_names=["x"], output_names=["y"],
                          opset_version=13)
    print(f"make_models: {path}")


class Tiny(nn.Module):  # ONNX Runtime's per-call overhead from node
    def forward(self, x):
        return x + 1


export("tiny", Tiny(), (1, 1))
export("mlp_b1", MLP(), (1, 784))
export("mlp_b64", MLP(), (64, 784))
export("block_b1", Block(), (1, 64, 56, 56))
export("block_b8", Block(), (8, 64, 56, 56))
export("mobile_b1", Mobile(), (1, 3, 224, 224))
