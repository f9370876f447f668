"""An observed speed: what the live system logs and what the learned speed model trains on."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain.cluster import ClusterSnapshot, Node, RunningJob


@dataclass(frozen=True, slots=True)
class SwitchLoad:
    """What one leaf switch's rack carried when a sample was taken: the share of its nodes' GPUs
    allocated (by any job, advised or not), and how many of the running jobs the advisor knows
    span this switch and another (they share its uplink). Rack-wide effects -- a power cap, an
    oversubscribed uplink -- reach jobs that share no node with the ones causing them."""

    switch: str
    gpu_busy: float
    crossing: int


@dataclass(frozen=True, slots=True)
class SpeedSample:
    """Job ``subject`` ran at ``speed`` iterations/s at ``time``, next to ``neighbours``.

    ``neighbours`` are the running jobs sharing at least one node with the subject, and
    ``nodes`` the nodes the subject or its neighbours use: everything a local speed model
    may look at, and nothing the simulator knows that a real cluster would not log.
    ``switches``: the load of each switch the subject's nodes hang off (empty in samples logged
    before it was recorded, and on clusters without switches).
    """

    time: float
    subject: RunningJob
    neighbours: tuple[RunningJob, ...]
    nodes: tuple[Node, ...]
    speed: float
    source: str = "sim"
    switches: tuple[SwitchLoad, ...] = ()


def switch_loads(snapshot: ClusterSnapshot, names: set[str] | None = None,
                 crossing: np.ndarray | None = None) -> dict[str, SwitchLoad]:
    """Every switch's load in ``snapshot`` (or those ``names``): O(nodes), plus O(running tasks)
    for the uplink users unless ``crossing`` (``uplink_users`` of the same running jobs) is given."""
    layout = snapshot.layout
    n_ids = len(layout.switch_names)
    cap = layout.capacity[:, 1].astype(np.float64)
    used = cap - snapshot.free_array()[:, 1]
    total = np.bincount(layout.switch_id, weights=cap, minlength=n_ids)
    busy = np.bincount(layout.switch_id, weights=used, minlength=n_ids)
    crossing = uplink_users(snapshot) if crossing is None else crossing
    return {name: SwitchLoad(name, float(busy[i] / total[i]) if total[i] > 0 else 0.0, int(crossing[i]))
            for i, name in enumerate(layout.switch_names)
            if name is not None and (names is None or name in names)}


def uplink_users(snapshot: ClusterSnapshot) -> np.ndarray:
    """Per switch id (``NodeLayout.switch_id``): the running jobs that span it and another switch."""
    layout = snapshot.layout
    crossing = np.zeros(len(layout.switch_names), dtype=np.int64)
    index, sid = layout.index, layout.switch_id.tolist()
    for rj in snapshot.running:
        nodes = rj.placement.nodes()
        if len(nodes) > 1:  # a one-node job crosses no uplink
            spanned = {sid[index[n]] for n in nodes if n in index}
            if len(spanned) > 1:
                crossing[list(spanned)] += 1
    return crossing
