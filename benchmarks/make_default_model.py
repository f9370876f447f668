"""Train the model shipped as the learned policy's default (slurm_advisor/data/model).

It is the demo's model: trained on the default 8 x 8-GPU cluster with speed samples logged under
the contention ground truth. A site should train its own with `slurm-advisor train` on its own
logged speeds; this one only makes `--policy learned` work out of the box.

    python benchmarks/make_default_model.py

The directory holds the numpy weights the daemon serves (weights.npz) beside the .pt files; for
the model as it is, without training again, they are written by

    slurm-advisor models export slurm_advisor/data/model
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from slurm_advisor.experiments.demo import DemoConfig, run_demo, to_json
from slurm_advisor.models import meta as model_meta
from slurm_advisor.models.meta import DEFAULT_MODEL_DIR


def main() -> int:
    with tempfile.TemporaryDirectory() as work:
        demo = run_demo(DemoConfig(), Path(work), log=lambda m: print(m, file=sys.stderr))
        source = Path(work) / "learned"
        summary = to_json(demo)
        model_meta.annotate(source, made_by="benchmarks/make_default_model.py (the demo's model)",
                            demo_results={"policies": summary["policies"],
                                          "speed_mape_unseen": summary["speed_mape_unseen"]})
        if DEFAULT_MODEL_DIR.exists():
            shutil.rmtree(DEFAULT_MODEL_DIR)
        shutil.copytree(source, DEFAULT_MODEL_DIR)
    size = sum(p.stat().st_size for p in DEFAULT_MODEL_DIR.iterdir())
    print(f"default model written to {DEFAULT_MODEL_DIR} ({size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
