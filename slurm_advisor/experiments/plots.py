"""The learning-curve plot written next to every trained model."""
from __future__ import annotations

from pathlib import Path


def plot_learning_curve(curve: list[dict], teacher: str, teacher_jct: float, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    validated = [(c["episode"], c["validation_jct"] / 3600) for c in curve if c.get("validation_jct") is not None]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(*zip(*validated), marker="o", label="learned (greedy, whole training trace)")
    sampled = [(c["episode"], c["episode_jct"] / 3600) for c in curve if c.get("episode_jct")]
    if sampled:
        ax.plot(*zip(*sampled), alpha=0.5, label="learned (sampling, training window)")
    ax.axhline(teacher_jct / 3600, color="gray", linestyle="--", label=f"{teacher} (teacher, same trace)")
    ax.set_xlabel("RL episode")
    ax.set_ylabel("avg JCT under the fitted speed model (h)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
