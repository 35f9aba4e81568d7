#!/usr/bin/python3
"""Real CNNs for the ONNX importer's tests and benchmarks, exported with Debian's
python3-torch / python3-torchvision (random weights, fixed seed; nothing downloaded), with a
dynamic batch dimension named "batch".

  /usr/bin/python3 scripts/make_real_models.py OUT_DIR

  mobilenet_v3_small.onnx  torchvision MobileNetV3-small, 1000 classes, 3x224x224
  resnet18.onnx            torchvision ResNet-18, 3x224x224
  unet_small.onnx          a small U-Net (ConvTranspose up-sampling, Resize, skip concats), 3x64x64
  mobilenet_v3_textline.onnx  MobileNetV3-small at 3x48x192 (a text-line classifier's input), 4 classes
  mobilenet_v3_large.onnx  torchvision MobileNetV3-large, 3x224x224 (the CNN benchmark)
  efficientnet_b0.onnx     torchvision EfficientNet-B0 (SiLU, squeeze-excite), 3x224x224
Each model also gets MODEL.input.npy (batch 1, seed 7) and MODEL.torch.npy (PyTorch's output on
it). Files present are kept (delete OUT_DIR to rebuild)."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/models"
os.makedirs(out_dir, exist_ok=True)


class UNetSmall(nn.Module):
    def __init__(self, c=16):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.e1, self.e2, self.e3 = block(3, c), block(c, 2 * c), block(2 * c, 4 * c)
        self.up2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.d2 = block(4 * c, 2 * c)
        self.d1 = block(3 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.e1(x)
        e2 = self.e2(F.max_pool2d(e1, 2))
        e3 = self.e3(F.max_pool2d(e2, 2))
        d2 = self.d2(torch.cat([self.up2(e3), e2], 1))
        d1 = self.d1(torch.cat([F.interpolate(d2, scale_factor=2.0, mode="bilinear",
                                              align_corners=False), e1], 1))
        return self.head(d1)


def build(name):
    if name == "mobilenet_v3_small":
        return torchvision.models.mobilenet_v3_small(weights=None), (3, 224, 224)
    if name == "resnet18":
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    if name == "unet_small":
        return UNetSmall(), (3, 64, 64)
    if name == "mobilenet_v3_textline":
        return torchvision.models.mobilenet_v3_small(weights=None, num_classes=4), (3, 48, 192)
    if name == "mobilenet_v3_large":
        return torchvision.models.mobilenet_v3_large(weights=None), (3, 224, 224)
    if name == "efficientnet_b0":
        return torchvision.models.efficientnet_b0(weights=None), (3, 224, 224)
    raise SystemExit("unknown model " + name)


names = sys.argv[2:] or ["mobilenet_v3_small", "resnet18", "unet_small", "mobilenet_v3_textline"]
for name in names:
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path):
        continue
    torch.manual_seed(2026)
    m, chw = build(name)
    m.eval()
    for mod in m.modules():  # non-trivial batch-norm statistics (fresh ones are 0 / 1)
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((1,) + chw).astype(np.float32))
    with torch.no_grad():
        y = m(x)
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".torch.npy"), y.numpy().astype(np.float32))
    print(name, os.path.getsize(path) // 1024, "KiB")
