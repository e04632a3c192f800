"""World-size-1 PyTorch DDP job for the GPU checks (run.sh), under torchrun:

    python3 -m torch.distributed.run --standalone --nproc_per_node=1 ddp_world1.py [options]

Plain (default): 60 timed iterations after 10 of warm-up, each ended by torch.cuda.synchronize();
prints the final loss, the median iteration time (host clock), and the median GPU time to the end
of the forward pass and of the backward pass (CUDA events; the backward's end includes DDP's wait
for its all-reduces). run.sh runs it with and without LD_PRELOAD=libmetronome.so: same loss, and
iteration times within 1 %.

--hold-period-ms P: the shim is served (gpu_scheduler) windows that open at every multiple of P in
CLOCK_REALTIME, with a late slack of P/2. Each iteration starts `lead` ms before a window opens, so
the device gate holds the NCCL stream from the first bucket's all-reduce until the window: a hold
of about lead minus the time to that bucket. lead 0 is the baseline (the phase starts inside the
slack: no hold). Then lead H1 inside the backward pass: with the device gate the backward compute
keeps running beside the held stream, so the iteration is about max(backward, H1) + the rest, not
that plus the hold; and lead H2 past the backward's end: the iteration is about H2 + the rest,
which shows that the hold is real. Prints one line per lead with the predictions.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def build(args):
    torch.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    layers.append(nn.Linear(args.width, 10))
    model = nn.Sequential(*layers).cuda()
    ddp = DDP(model, device_ids=[torch.cuda.current_device()], bucket_cap_mb=25)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width, device="cuda")
    y = torch.randint(0, 10, (args.batch,), device="cuda")
    return ddp, opt, x, y


def step(ddp, opt, x, y, start_ns):
    """One iteration from start_ns (host clock); returns (iteration ms, fwd ms, bwd ms, loss)."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    ev[0].record()
    opt.zero_grad(set_to_none=False)
    loss = nn.functional.cross_entropy(ddp(x), y)
    ev[1].record()
    loss.backward()
    ev[2].record()
    opt.step()
    torch.cuda.synchronize()
    it = (time.time_ns() - start_ns) / 1e6
    return it, ev[0].elapsed_time(ev[1]), ev[0].elapsed_time(ev[2]), loss.item()


def wait_until_lead(period_ns, lead_ns):
    """Sleeps until lead_ns before a window opens (windows at multiples of period_ns)."""
    k = (time.time_ns() + lead_ns + 2_000_000) // period_ns + 1
    start = k * period_ns - lead_ns
    while True:
        left = start - time.time_ns()
        if left <= 0:
            return start
        if left > 1_000_000:
            time.sleep((left - 1_000_000) / 1e9)


def med(rows, i):
    return statistics.median(r[i] for r in rows)


def plain(args, ddp, opt, x, y):
    rows = []
    for i in range(args.warmup + args.iters):
        r = step(ddp, opt, x, y, time.time_ns())
        if i >= args.warmup:
            rows.append(r)
    print(f"ddp final_loss={rows[-1][3]:.6f} median_iter_ms={med(rows, 0):.3f} "
          f"fwd_ms={med(rows, 1):.3f} bwd_ms={med(rows, 2):.3f}", flush=True)


def hold(args, ddp, opt, x, y):
    period = int(args.hold_period_ms * 1e6)

    def run(lead_ms, n):
        lead = int(lead_ms * 1e6)
        return [step(ddp, opt, x, y, wait_until_lead(period, lead)) for _ in range(n)]

    # Warm-up: the shim registers, takes the timetable, and its tracker learns the iteration.
    t_end = time.time() + args.warmup_s
    while time.time() < t_end:
        run(0, 1)
    base = run(0, args.iters)
    t0, fwd, bwd = med(base, 0), med(base, 1), med(base, 2)
    rest = t0 - bwd  # after the backward (and its all-reduces): optimizer step, synchronize
    h1 = fwd + 0.6 * (bwd - fwd)
    h2 = min(1.25 * t0, args.hold_period_ms / 2 - 2)  # the hold must stay within the slack
    print(f"ddp_hold period_ms={args.hold_period_ms:.1f} base_iter_ms={t0:.3f} fwd_ms={fwd:.3f} "
          f"bwd_ms={bwd:.3f} rest_ms={rest:.3f}", flush=True)
    for name, lead in (("h1", h1), ("h2", h2)):
        rows = run(lead, args.iters)
        overlap = max(bwd, lead) + rest  # the backward runs beside the held stream
        serial = t0 + max(lead - fwd, 0)  # the hold added to the iteration: at most this
        print(f"ddp_hold {name} lead_ms={lead:.3f} iter_ms={med(rows, 0):.3f} "
              f"bwd_ms={med(rows, 2):.3f} predicted_overlap_ms={overlap:.3f} "
              f"predicted_serial_ms={serial:.3f} final_loss={rows[-1][3]:.6f}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--hold-period-ms", type=float, default=0.0)
    p.add_argument("--warmup-s", type=float, default=3.0)
    args = p.parse_args()
    # torchrun sets these; the defaults let the script run alone too.
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    ddp, opt, x, y = build(args)
    if args.hold_period_ms > 0:
        hold(args, ddp, opt, x, y)
    else:
        plain(args, ddp, opt, x, y)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
