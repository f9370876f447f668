"""Tables and plots of simulation results. Pure formatting; callers decide where output goes."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from slurm_advisor.sim.metrics import SimResult

COLUMNS = ("avg_jct", "p95_jct", "makespan", "avg_queueing", "mean_slowdown", "utilization")


def summaries(results: Mapping[str, SimResult]) -> dict[str, dict[str, float]]:
    return {name: r.summary() for name, r in results.items()}


#: (summary key, column header, hours): jobs here run for hours, so times are shown in hours
_HEADERS = (("avg_jct", "avg JCT h", True), ("p95_jct", "p95 JCT h", True), ("makespan", "makespan h", True),
            ("avg_queueing", "avg wait h", True), ("mean_slowdown", "slowdown", False),
            ("utilization", "utilization", False))


def table(results: Mapping[str, SimResult], reference: str = "slurm-default", floor: float | None = None) -> str:
    """One row per policy, times in hours (the summaries keep seconds); ``floor`` (``sim/floor.py``'s
    avg JCT, seconds) adds a line under them."""
    rows = summaries(results)
    ref = rows.get(reference, {}).get("avg_jct")
    head = f"{'policy':<14}" + "".join(f"{h:>13}" for _, h, _ in _HEADERS) + f"{'avg JCT / ' + reference:>28}"
    lines = [head, "-" * len(head)]
    for name, s in rows.items():
        if not s.get("jobs"):
            lines.append(f"{name:<14}  (no job finished)")
            continue
        cells = "".join(f"{s[c] / 3600:>13.2f}" if hours else f"{s[c]:>13.3f}" for c, _, hours in _HEADERS)
        ratio = f"{s['avg_jct'] / ref:>28.3f}" if ref else f"{'-':>28}"
        lines.append(f"{name:<14}{cells}{ratio}")
    skipped = max((s.get("skipped", 0) for s in rows.values()), default=0)
    if skipped:
        lines.append(f"({skipped} job(s) can never fit on this cluster and were not simulated)")
    if floor is not None:
        ratio = f" ({floor / ref:.3f} x {reference})" if ref else ""
        lines.append(f"floor: avg JCT {floor / 3600:.2f} h{ratio}: no job waits, each runs alone on the fastest "
                     "baseline placement")
    return "\n".join(lines)


def plot_jct_cdf(results: Mapping[str, SimResult], path: str | Path, title: str = "") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, r in results.items():
        jct = np.sort([rec.jct for rec in r.records]) / 3600.0
        if len(jct):
            ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title or "JCT CDF")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
