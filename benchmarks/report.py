"""Markdown tables for the README from the benchmarks' JSON results.

    python benchmarks/report.py [--results benchmarks/results] > table.md
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("slurm-default", "pack", "spread", "random", "tetris", "oracle", "learned")


def quality(data: dict) -> list[str]:
    lines = ["| setting | " + " | ".join(POLICIES) + " | learned vs slurm-default | learned vs best baseline | deployed |",
             "|---|" + "---|" * (len(POLICIES) + 3)]
    for key, s in data["settings"].items():
        if key.startswith("ablations:"):
            continue
        rows = s["policies"]
        ref = rows["slurm-default"]["avg_jct"]
        best = min(v["avg_jct"] for k, v in rows.items() if k in POLICIES[:5])
        cells = " | ".join(f"{rows[p]['avg_jct'] / 3600:.1f}" if p in rows else "-" for p in POLICIES)
        learned = rows["learned"]["avg_jct"]
        deployed = s.get("deployed", {}).get("learned", "?")
        lines.append(f"| {key} | {cells} | {learned / ref:.3f} | {learned / best:.3f} | {deployed} |")
    return lines


def ablations(data: dict) -> list[str]:
    lines = []
    for key, s in data["settings"].items():
        variants = {k: s["policies"][k] for k in s.get("deployed", {})}  # every trained variant
        if len(variants) > 1:
            ref = s["policies"]["slurm-default"]["avg_jct"]
            lines += [(f"Ablations on {key} (avg JCT vs slurm-default; deployed: network or the teacher, "
                       "and the patience it holds jobs with):"), "",
                      "| variant | avg JCT (h) | vs slurm-default | deployed | holds | train s |",
                      "|---|---|---|---|---|---|"]
            for name, v in variants.items():
                lines.append(f"| {name} | {v['avg_jct'] / 3600:.1f} | {v['avg_jct'] / ref:.3f} | "
                             f"{s['deployed'][name]} | {v.get('holds', 0)} | {s['train_seconds'].get(name, 0):.0f} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    args = ap.parse_args(argv)
    q = json.loads((args.results / "quality.json").read_text())
    print("Average JCT in hours on the test trace (lower is better):\n")
    print("\n".join(quality(q)))
    print()
    print("\n".join(ablations(q)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
