"""`slurm-topo`: select/cons_tres under topology/tree (``TopologyPlugin=topology/tree``).

Slurm 22.05's ``_eval_nodes_topo`` (``slurm/cons_tres.py``): leaf switches one at a time,
each the tightest fit by usable node count, their nodes in index order. Nodes' ``switch`` is
the leaf switch; all leaves hang under one root (a two-level tree, as our cluster files say).
"""
from __future__ import annotations

from slurm_advisor.policies.slurm_default import SlurmDefaultPolicy


class SlurmTopoPolicy(SlurmDefaultPolicy):
    name = "slurm-topo"
    topology = True
