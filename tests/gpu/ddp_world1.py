"""World-size-1 PyTorch DDP job, unchanged: run with and without LD_PRELOAD=libmetronome.so.

Prints the final loss and the median iteration time; run_gpu_checks.sh compares the runs.
"""
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.manual_seed(0)
    torch.cuda.set_device(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 10)).cuda()
    ddp = DDP(model, device_ids=[0], bucket_cap_mb=25)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")
    times = []
    loss = None
    for _ in range(60):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    print(f"ddp final_loss={loss.item():.6f} median_iter_ms={statistics.median(times[10:]) * 1e3:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
