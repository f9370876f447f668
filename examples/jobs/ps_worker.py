"""A small parameter-server job on CPU: torch.distributed with the gloo backend, one process per task.

Started by ps_worker.sbatch with ``srun --distribution=arbitrary`` and the hostfile of
``slurm-advisor layout --format hostfile``: the task on line r gets rank r, so ranks 0..P-1 are the
PS and the rest are workers. Each PS holds one shard (a slice of the flat parameter vector) of a
small MLP. Per iteration every worker computes gradients on random data and pushes each shard's
part to its PS (``dist.reduce`` in the group {that PS} + workers); the PS averages them, takes an
SGD step and the workers pull the new shard back (``dist.broadcast`` from the PS).

Reads SLURM_PROCID, SLURM_NTASKS, SLURMD_NODENAME, MASTER_ADDR/MASTER_PORT (task 0's node and a
port, exported by the sbatch script from the layout) and SLURM_ADVISOR_NUM_PS / _PS_HOSTS /
_WORKER_HOSTS (``eval "$(slurm-advisor layout)"``). Prints one line per task: role, node, the node
the layout advised, iterations/s. Rank 0 also reports the job's speed to the advisor's daemon
(slurm_advisor.report: every 10 iterations, in the background; never slows or fails the job).
A MASTER_ADDR that does not resolve (the testbed's n1..n4 all live on localhost) is taken to be
127.0.0.1.
"""
from __future__ import annotations

import datetime
import os
import socket
import time

import torch
import torch.distributed as dist
from torch import nn

ITERATIONS = int(os.environ.get("ITERATIONS", "20"))


def start() -> tuple[int, int, str]:
    """Join the job's process group; (rank, world size, the node this task runs on)."""
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    try:
        socket.getaddrinfo(os.environ["MASTER_ADDR"], None)
    except (KeyError, OSError):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
    torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    return rank, world, os.environ.get("SLURMD_NODENAME", socket.gethostname())


def finish() -> None:
    """Leave the process group once every rank is done with it.

    The barrier keeps a rank from tearing its connections down while another still sends on them,
    and destroying the group before the interpreter exits joins gloo's threads while Python is
    whole: left to exit, a rank could abort ("terminate called without an active exception").
    Called on success only: after an error the other ranks may never reach the barrier.
    """
    dist.barrier()
    dist.destroy_process_group()


def report(role: str, index: int, rank: int, node: str, rate: float, extra: str = "") -> None:
    hosts = [h for key in ("SLURM_ADVISOR_PS_HOSTS", "SLURM_ADVISOR_WORKER_HOSTS")
             for h in os.environ.get(key, "").split(",") if h]
    advised = hosts[rank] if rank < len(hosts) else "?"
    print(f"role={role} index={index} rank={rank} node={node} advised={advised} "
          f"iterations/s={rate:.1f}{extra}", flush=True)


def speed_reporter(rank: int):
    """Rank 0's Reporter (the job's iterations/s, every 10 iterations); None on other ranks."""
    try:
        from slurm_advisor.report import Reporter
    except ImportError:  # run without the advisor installed: nothing to report to
        return None
    return Reporter(every=10) if rank == 0 else None


def model() -> nn.Module:
    torch.manual_seed(0)  # every task starts from the same parameters
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))


def main() -> None:
    rank, world, node = start()
    num_ps = int(os.environ.get("SLURM_ADVISOR_NUM_PS", "1"))
    if not 1 <= num_ps < world:
        raise SystemExit(f"ps_worker.py needs 1 <= PS < {world} tasks, not {num_ps}")
    workers = list(range(num_ps, world))
    groups = [dist.new_group([ps, *workers]) for ps in range(num_ps)]  # every rank creates every group
    net = model()
    torch.manual_seed(1 + rank)  # each worker its own data
    params = list(net.parameters())
    flat = nn.utils.parameters_to_vector(params).detach()
    shards = [(int(s[0]), int(s[-1]) + 1) for s in torch.tensor_split(torch.arange(flat.numel()), num_ps)]
    reporter = speed_reporter(rank)
    dist.barrier()
    began = time.perf_counter()
    if rank < num_ps:
        lo, hi = shards[rank]
        shard = flat[lo:hi].clone()
        for _ in range(ITERATIONS):
            grad = torch.zeros_like(shard)
            dist.reduce(grad, dst=rank, group=groups[rank])  # workers push: the sum of their gradients
            shard -= 0.05 * grad / len(workers)
            dist.broadcast(shard, src=rank, group=groups[rank])  # workers pull the new shard
            if reporter:
                reporter.step()
        if reporter:
            reporter.flush()
        report("ps", rank, rank, node, ITERATIONS / (time.perf_counter() - began), f" shard={hi - lo}")
        finish()
        return
    for _ in range(ITERATIONS):
        x = torch.randn(128, 64)
        loss = nn.functional.mse_loss(net(x), x[:, :1] * 2 - x[:, 1:2])
        net.zero_grad()
        loss.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        for ps, (lo, hi) in enumerate(shards):
            dist.reduce(grad[lo:hi].contiguous(), dst=ps, group=groups[ps])
        for ps, (lo, hi) in enumerate(shards):
            shard = torch.empty(hi - lo)
            dist.broadcast(shard, src=ps, group=groups[ps])
            flat[lo:hi] = shard
        nn.utils.vector_to_parameters(flat, params)
    report("worker", rank - num_ps, rank, node, ITERATIONS / (time.perf_counter() - began), f" loss={loss.item():.3f}")
    finish()


if __name__ == "__main__":
    main()
