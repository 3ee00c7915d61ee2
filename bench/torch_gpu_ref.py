#!/usr/bin/env python3
"""PyTorch references for bench/run.sh gpu: training images/s of RefNet (batch 128, 28x28x1, the
same net as ../shared/bench/torch_refnet.py) or ResNet-50 v1.5 (batch 64, 224x224x3, synthetic
data, as tf_cnn_benchmarks measures it) on one device, fwd+bwd+SGD-momentum update, FP32 (TF32
off, so both sides compute in the same precision).

  torch_gpu_ref.py --model refnet|resnet50 [--device cuda|cpu] [--batch N] [--steps N]
Prints `BENCH_TRAIN median X img/s`."""

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RefNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = self.drop(F.relu(self.fc1(x)))
        return self.fc2(x)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.proj = None
        if stride != 1 or cin != width * 4:
            self.proj = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                                      nn.BatchNorm2d(width * 4))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.proj(x) if self.proj is not None else x))


class ResNet50(nn.Module):
    """configs/resnet50.yaml, layer for layer (25,557,032 parameters)."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for width, count, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for b in range(count):
                blocks.append(Bottleneck(cin, width, stride if b == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["refnet", "resnet50"], required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch", type=int, default=0, help="default: 128 refnet, 64 resnet50")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--math", choices=["fp32", "tf32", "amp"], default="fp32",
                   help="fp32 (the comparison: pstrain computes in plain FP32), or for context "
                   "tf32 (TF32 tensor cores) or amp (bf16 autocast)")
    p.add_argument("--profile_steps", type=int, default=0,
                   help="then profile this many steps and print the GPU kernels by total time "
                   "(which cuDNN engines and elementwise kernels PyTorch runs)")
    args = p.parse_args()
    tf32 = args.math != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device(args.device)
    if args.model == "refnet":
        model, shape, classes, batch = RefNet(), (1, 28, 28), 10, args.batch or 128
    else:
        model, shape, classes, batch = ResNet50(), (3, 224, 224), 1000, args.batch or 64
    model = model.to(dev).train()
    params = sum(t.numel() for t in model.parameters())
    print(f"torch {torch.__version__} on {dev} "
          f"({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'CPU'}), "
          f"{args.model}: {params} parameters, batch {batch}, math {args.math}", flush=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn((batch,) + shape, device=dev)
    y = torch.arange(batch, device=dev) % classes

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.math == "amp"):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(args.warmup):
        step()
    sync()
    rates = []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync()
        dt = time.perf_counter() - t0
        rates.append(args.steps * batch / dt)
        print(f"torch repeat {r}: {args.steps} steps in {dt:.3f} s = {rates[-1]:.1f} img/s",
              flush=True)
    print(f"BENCH_TRAIN median {statistics.median(rates):.1f} img/s (batch {batch}, "
          f"{args.steps} steps, {args.repeats} repeats, {dev}, math {args.math})")
    if args.profile_steps > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.profile_steps):
                step()
            sync()
        print(f"GPU kernels over {args.profile_steps} steps, by total time:")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90))


if __name__ == "__main__":
    main()
