"""A small all-reduce job on CPU: DistributedDataParallel over gloo, workers only, one process per task.

Started by allreduce.sbatch with ``srun --distribution=arbitrary`` and the hostfile of
``slurm-advisor layout --format hostfile`` (task r on line r). Rank 0 opens the rendezvous at
MASTER_ADDR:MASTER_PORT (the first worker's node, from the layout). Joining and leaving the
group and the one-line report are ps_worker.py's (same folder), as are the model and the speed
reports to the advisor (rank 0, every 10 iterations). Prints, per task, its node, the node the
layout advised and the iterations/s it reached.
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from ps_worker import ITERATIONS, finish, model, report, speed_reporter, start
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    rank, world, node = start()
    if int(os.environ.get("SLURM_ADVISOR_NUM_PS", "0")):
        raise SystemExit("allreduce.py runs workers only; this layout has PS tasks")
    net = DistributedDataParallel(model())
    torch.manual_seed(1 + rank)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    reporter = speed_reporter(rank)
    dist.barrier()
    began = time.perf_counter()
    for _ in range(ITERATIONS):
        x = torch.randn(128, 64)
        loss = nn.functional.mse_loss(net(x), x[:, :1] * 2 - x[:, 1:2])
        optimizer.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if reporter:
            reporter.step()
    if reporter:
        reporter.flush()
    report("worker", rank, rank, node, ITERATIONS / (time.perf_counter() - began),
           f" world={world} loss={loss.item():.3f}")
    del net  # DDP's reducer holds the group: let it go first
    finish()


if __name__ == "__main__":
    main()
