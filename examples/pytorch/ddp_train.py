"""A plain PyTorch DDP training script: nothing in it knows about Metronome.

Run it under torchrun (one process per GPU). With LD_PRELOAD=libmetronome.so in its environment,
its NCCL all-reduces are gated into the time slots metronome-scheduler plans; without, it runs as
usual. Synthetic data, so it needs no data set:

    torchrun --nproc-per-node=1 ddp_train.py --model resnet50 --iterations 200
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def build_model(name: str) -> nn.Module:
    try:
        import torchvision.models as tvm
        if hasattr(tvm, name):
            return getattr(tvm, name)(weights=None)
    except ImportError:
        pass
    # Without torchvision (or for other names): an MLP with about 25 M parameters.
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 2048), nn.ReLU(),
                         nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1000))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)

    model = DDP(build_model(args.model).to(device), device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    size = 224 if args.model.startswith(("resnet", "vgg", "wide")) else 64
    x = torch.randn(args.batch_size, 3, size, size, device=device)
    y = torch.randint(0, 1000, (args.batch_size,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    times = []
    for it in range(args.iterations):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if use_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if dist.get_rank() == 0 and (it + 1) % 50 == 0:
            recent = sorted(times[-50:])
            print(f"iter {it + 1}: median {recent[len(recent) // 2] * 1e3:.1f} ms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
