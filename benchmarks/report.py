"""Markdown tables for the README from the benchmarks' JSON results.

    python benchmarks/report.py [--results benchmarks/results] [--quality quality-seed1.json] > table.md
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("slurm-default", "slurm-topo", "pack", "spread", "random", "tetris", "lif", "oracle", "learned")
BASELINES = POLICIES[:7]  # the rules to beat: not the oracle (never deployable), not the learned policy


def over_traces(traces: dict[str, list[float]], name: str) -> tuple[dict, str]:
    """``name``'s mean avg JCT over the test traces relative to slurm-default and to the baseline
    with the best mean (oracle and trained variants excluded), and its ratio to that baseline on
    each trace."""
    baselines = [b for b in BASELINES if b in traces]
    means = {k: sum(v) / len(v) for k, v in traces.items()}
    best = min(baselines, key=means.get)
    per = " ".join(f"{a / b:.3f}" for a, b in zip(traces[name], traces[best]))
    return {"vs slurm": means[name] / means["slurm-default"], "vs best": means[name] / means[best], "best": best}, per


def quality(data: dict) -> list[str]:
    """Per setting: each policy's avg JCT averaged over the test traces, and the learned policy's
    ratios (of those means, and per trace to the baseline with the best mean)."""
    lines = ["| setting | " + " | ".join(POLICIES) + " | learned vs slurm-default | learned vs best baseline "
             "| per trace vs best | deployed |",
             "|---|" + "---|" * (len(POLICIES) + 4)]
    for key, s in data["settings"].items():
        traces = s["avg_jct_by_test_trace"]
        cells = " | ".join(f"{sum(traces[p]) / len(traces[p]) / 3600:.1f}" if p in traces else "-" for p in POLICIES)
        mean, per = over_traces(traces, "learned")
        deployed = s.get("deployed", {}).get("learned", "?")
        lines.append(f"| {key} | {cells} | {mean['vs slurm']:.3f} | {mean['vs best']:.3f} ({mean['best']}) "
                     f"| {per} | {deployed} |")
    return lines


def timeouts(data: dict) -> list[str]:
    """Jobs Slurm killed at their time limit, summed over the test traces: a killed job ends
    early and shortens the avg JCT, so a policy must not look good by getting jobs killed."""
    lines = ["| setting | " + " | ".join(POLICIES) + " | learned per trace |", "|---|" + "---|" * (len(POLICIES) + 1)]
    for key, s in data["settings"].items():
        killed = s.get("timeouts_by_test_trace")
        if killed is None:
            continue
        cells = " | ".join(str(sum(killed[p])) if p in killed else "-" for p in POLICIES)
        lines.append(f"| {key} | {cells} | {' '.join(map(str, killed.get('learned', [])))} |")
    return lines


def ablations(data: dict) -> list[str]:
    lines = []
    for key, s in data["settings"].items():
        variants = {k: s["policies"][k] for k in s.get("deployed", {})}  # every trained variant
        if len(variants) > 1:
            traces = s["avg_jct_by_test_trace"]
            lines += [(f"Ablations on {key} (avg JCT over the test traces; deployed: network or the teacher, "
                       "and the patience it holds jobs with; holds: on the first test trace):"), "",
                      ("| variant | avg JCT (h) | vs slurm-default | vs best baseline | per trace vs best | deployed "
                       "| holds | timeouts | train s |"),
                      "|---|---|---|---|---|---|---|---|---|"]
            killed = s.get("timeouts_by_test_trace", {})
            for name, v in variants.items():
                mean, per = over_traces(traces, name)
                lines.append(f"| {name} | {sum(traces[name]) / len(traces[name]) / 3600:.1f} | {mean['vs slurm']:.3f} | "
                             f"{mean['vs best']:.3f} ({mean['best']}) | {per} | {s['deployed'][name]} | "
                             f"{v.get('holds', 0)} | {sum(killed.get(name, [0]))} | "
                             f"{s['train_seconds'].get(name, 0):.0f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--quality", default="quality.json", help="the placement-quality JSON in --results")
    args = ap.parse_args(argv)
    q = json.loads((args.results / args.quality).read_text())
    print("Average JCT in hours, mean over the test traces (lower is better):\n")
    print("\n".join(quality(q)))
    print("\nJobs killed at their time limit (TIMEOUT), summed over the test traces:\n")
    print("\n".join(timeouts(q)))
    print()
    print("\n".join(ablations(q)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
