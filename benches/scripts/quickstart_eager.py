"""The quickstart cell's model and recipe in PyTorch eager, timed the way
benchkit times a cell: ResNet-18 (ImageNet stem, width 0.25, one input
channel, 10 classes) on 28x28 images, SGD with momentum 0.9 and weight decay
5e-4, batch 64, the first 5 steps excluded, then images/s and step-time
percentiles over the measured steps. Data are synthetic tensors already in
memory, so the figure is the engine's alone.

    python benches/scripts/quickstart_eager.py --threads 2 --steps 60

Needs `pip install torch`; CI does not run it.
"""

import argparse
import statistics
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def resnet18(width=0.25, in_channels=1, classes=10):
    widths = [int(c * width) for c in (64, 128, 256, 512)]
    layers = [
        nn.Conv2d(in_channels, widths[0], 7, 2, 3, bias=False),
        nn.BatchNorm2d(widths[0]),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = widths[0]
    for i, cout in enumerate(widths):
        for j in range(2):
            layers.append(Block(cin, cout, 2 if (i > 0 and j == 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = resnet18().to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    times = []
    for _ in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()  # each step's time includes its GPU work, as timing = "step"
        times.append(time.perf_counter() - t0)
    measured = times[args.warmup:]
    q = statistics.quantiles(measured, n=10)
    print(
        f"torch {torch.__version__} {args.device} threads {args.threads} params {params}: "
        f"{args.batch * len(measured) / sum(measured):.1f} img/s, "
        f"step p50 {1e3 * statistics.median(measured):.1f} ms, p90 {1e3 * q[8]:.1f} ms"
    )


if __name__ == "__main__":
    main()
