#!/usr/bin/python3
"""The classification zoo of scripts/bench_zoo.sh: one torchvision architecture per family (and
family size) of Debian's python3-torchvision (0.14), random weights (torch.manual_seed(0),
batch-norm statistics drawn as in make_real_models.py, layer-norm scales and shifts drawn too;
ViT's zero-initialized classifier and ConvNeXt's 1e-6 layer scales redrawn, else the output
would not depend on the blocks; nothing downloaded), eval mode, ONNX opset 17, input "x" with a
dynamic batch dimension named "batch", output "y".

  /usr/bin/python3 scripts/make_zoo_models.py OUT_DIR [name ...]   (default: the whole zoo)
  /usr/bin/python3 scripts/make_zoo_models.py --list               (the zoo's names, in order)

Each model gets NAME.onnx, NAME.input.npy (batch 1, standard normal, numpy seed 7), NAME.torch.npy
(PyTorch's output on it) and NAME.json: family, the resolution it was exported at, torchvision's
resolution, its multiply-adds per image (convolutions and matrix products, counted by the torch
profiler) and a note saying why the resolution differs from torchvision's, or why it does not.
A model above MAX_GMACS multiply-adds per image at torchvision's resolution (a batch-8 call of
ViT-B/16 at 224 is seconds on one core) goes in at the largest multiple of 32 under that, or at
torchvision's resolution when the export at the smaller one fails (VGG-16: its adaptive pooling
to 7x7 exports only when 7 divides the feature map); a model whose export fails at torchvision's
resolution is tried once more at half of it. A model that still fails is skipped: one line
"skipped NAME: why" on stderr, its NAME.json holds {"skipped": why}, and the exit code is 1.
Models whose NAME.onnx and NAME.json are present are kept (delete them to rebuild)."""
import json
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torch.profiler import profile

warnings.filterwarnings("ignore")
MAX_GMACS = 6.0

# name: (family, torchvision's resolution, constructor keyword arguments)
ZOO = {
    "alexnet": ("AlexNet", 224, {}),
    "vgg16": ("VGG", 224, {}),
    "resnet50": ("ResNet", 224, {}),
    "wide_resnet50_2": ("Wide-ResNet", 224, {}),
    "resnext50_32x4d": ("ResNeXt", 224, {}),
    "densenet121": ("DenseNet", 224, {}),
    "inception_v3": ("Inception v3", 299, {"aux_logits": False, "init_weights": True}),
    "googlenet": ("GoogLeNet", 224, {"aux_logits": False, "init_weights": True}),
    "squeezenet1_1": ("SqueezeNet", 224, {}),
    "mobilenet_v2": ("MobileNet v2", 224, {}),
    "mobilenet_v3_small": ("MobileNet v3", 224, {}),
    "mobilenet_v3_large": ("MobileNet v3", 224, {}),
    "mnasnet1_0": ("MnasNet", 224, {}),
    "shufflenet_v2_x1_0": ("ShuffleNet v2", 224, {}),
    "efficientnet_b0": ("EfficientNet", 224, {}),
    "efficientnet_b1": ("EfficientNet", 240, {}),
    "efficientnet_b2": ("EfficientNet", 288, {}),
    "efficientnet_b3": ("EfficientNet", 300, {}),
    "efficientnet_v2_s": ("EfficientNet v2", 384, {}),
    "regnet_x_400mf": ("RegNet X", 224, {}),
    "regnet_y_400mf": ("RegNet Y", 224, {}),
    "convnext_tiny": ("ConvNeXt", 224, {}),
    "vit_b_16": ("ViT", 224, {}),
    "swin_t": ("Swin", 224, {}),
}


def build(name, res):
    kw = dict(ZOO[name][2])
    if name.startswith("vit_"):  # the position embedding is sized for one resolution
        kw["image_size"] = res
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None, **kw)
    m.eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):  # fresh statistics are 0 / 1
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
            if isinstance(mod, nn.LayerNorm) and mod.elementwise_affine:  # fresh ones are 1 / 0
                mod.weight.uniform_(0.8, 1.2)
                mod.bias.uniform_(-0.1, 0.1)
            # torchvision's initial values that would hide a branch from the accuracy check:
            # ViT's zero classifier (a constant output) and ConvNeXt's 1e-6 layer scale.
            if isinstance(mod, nn.Linear) and not mod.weight.any():
                nn.init.trunc_normal_(mod.weight, std=0.02)
                if mod.bias is not None:
                    mod.bias.uniform_(-0.1, 0.1)
            if hasattr(mod, "layer_scale") and isinstance(mod.layer_scale, nn.Parameter):
                mod.layer_scale.uniform_(0.1, 0.5)
    return m


def gmacs(m, res):
    """Multiply-adds per image of the convolutions and matrix products (torch profiler)."""
    ops = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
    with torch.no_grad(), profile(with_flops=True) as p:
        m(torch.zeros(1, 3, res, res))
    return sum(e.flops for e in p.key_averages() if e.key in ops) / 2e9


def export(name, res, out_dir):
    m = build(name, res)
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((1, 3, res, res)).astype(np.float32))
    with torch.no_grad():
        y = m(x)
    path = os.path.join(out_dir, name + ".onnx")
    tmp = path + ".part"
    torch.onnx.export(m, (x,), tmp, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.save(os.path.join(out_dir, name + ".input.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".torch.npy"), y.numpy().astype(np.float32))
    os.replace(tmp, path)
    return m


def error_line(e):
    line = (str(e).strip().splitlines() or [""])[0].split(" Please feel free")[0]
    return f"{type(e).__name__}: {line}"[:200]


def make(name, out_dir):
    family, native, _ = ZOO[name]
    info = {"name": name, "family": family, "native_resolution": native}
    notes = []
    g_native = gmacs(build(name, native), native)
    info["native_gmacs"] = round(g_native, 3)
    tries = [native, native // 2 // 32 * 32]  # a failing export goes in once more at half size
    if g_native > MAX_GMACS:
        res = int(native * math.sqrt(MAX_GMACS / g_native)) // 32 * 32
        while res > 32 and gmacs(build(name, res), res) > MAX_GMACS:
            res -= 32
        notes.append(f"{g_native:.1f} G multiply-adds per image at {native}, above the zoo's {MAX_GMACS:g} G")
        tries = [res, native]  # the reduced size, else torchvision's
    for i, res in enumerate(tries):
        try:
            m = export(name, res, out_dir)
            break
        except Exception as e:  # noqa: BLE001 - any export failure is reported, then the next size
            if i + 1 == len(tries):
                raise
            why = error_line(e)
            print(f"{name}: export at {res} fails ({why}); trying {tries[i + 1]}", file=sys.stderr)
            notes.append(f"the export at {res} fails ({why})")
    if res != native:
        notes.append(f"reduced from {native}")
    elif len(notes) > 1:
        notes.append(f"kept at {native}")
    info["note"] = "; ".join(notes) if res != native or len(notes) > 1 else ""
    info["resolution"] = res
    info["gmacs"] = round(gmacs(m, res), 3)
    info["params_m"] = round(sum(p.numel() for p in m.parameters()) / 1e6, 2)
    return info


def main():
    if sys.argv[1:2] == ["--list"]:
        print("\n".join(ZOO))
        return 0
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        print(f"unknown model(s) {' '.join(unknown)}; the zoo: {' '.join(ZOO)}", file=sys.stderr)
        return 2
    os.makedirs(out_dir, exist_ok=True)
    failed = 0
    for name in names:
        meta = os.path.join(out_dir, name + ".json")
        if os.path.exists(os.path.join(out_dir, name + ".onnx")) and os.path.exists(meta):
            continue
        try:
            info = make(name, out_dir)
        except Exception as e:  # noqa: BLE001
            why = error_line(e)
            print(f"skipped {name}: {why}", file=sys.stderr)
            json.dump({"name": name, "family": ZOO[name][0], "skipped": why}, open(meta, "w"), indent=1)
            failed += 1
            continue
        json.dump(info, open(meta, "w"), indent=1)
        size = os.path.getsize(os.path.join(out_dir, name + ".onnx")) >> 20
        print(f"{name}: {info['resolution']}x{info['resolution']}, {info['gmacs']:.2f} G multiply-adds, "
              f"{size} MiB" + (f" ({info['note']})" if info["note"] else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
