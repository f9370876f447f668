"""An observed speed: what the live system logs and what the learned speed model trains on."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slurm_advisor.domain.cluster import ClusterSnapshot, Node, NodeLayout, RunningJob
from slurm_advisor.domain.placement import Placement


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
    """Every switch's load in ``snapshot`` (or those ``names``), GPUs allocated as its free
    capacity says: O(nodes), plus O(running tasks) for the uplink users unless ``crossing``
    (``uplink_users`` of the same running jobs) is given."""
    layout = snapshot.layout
    used = layout.capacity[:, 1] - snapshot.free_array()[:, 1]
    crossing = uplink_users(layout, snapshot.running) if crossing is None else crossing
    return _loads(layout, used, crossing, names)


def running_switch_loads(nodes: Sequence[Node], running: Iterable[RunningJob]) -> dict[str, SwitchLoad]:
    """Every switch's load when exactly ``running`` run on ``nodes`` (a replay under a model,
    where no free capacity is kept apart from the running jobs)."""
    layout = NodeLayout.of(nodes if isinstance(nodes, tuple) else tuple(nodes))
    running = tuple(running)
    used = np.zeros(len(layout.nodes))
    index = layout.index
    for rj in running:
        ps, worker = rj.job.ps_demand.gpus, rj.job.worker_demand.gpus
        for n, n_ps, n_w in rj.placement.per_node():
            i = index.get(n)
            if i is not None:
                used[i] += n_ps * ps + n_w * worker
    return _loads(layout, used, uplink_users(layout, running))


def for_placement(loads: Mapping[str, SwitchLoad], snapshot: ClusterSnapshot,
                  placement: Placement) -> tuple[SwitchLoad, ...]:
    """The loads of the switches ``placement``'s nodes hang off, in first-use order (a sample's ``switches``)."""
    switches = dict.fromkeys(snapshot.node(n).switch for n in placement.nodes())
    return tuple(loads[s] for s in switches if s in loads)


def uplink_users(layout: NodeLayout, running: Iterable[RunningJob]) -> np.ndarray:
    """Per switch id (``NodeLayout.switch_id``): the running jobs that span it and another switch
    (nodes on no switch have no uplink: they count for neither)."""
    crossing = np.zeros(len(layout.switch_names), dtype=np.int64)
    for rj in running:
        spanned = crossed_uplinks(layout, rj)
        if spanned:
            crossing[spanned] += 1
    return crossing


def crossed_uplinks(layout: NodeLayout, rj: RunningJob) -> list[int]:
    """The switch ids whose uplinks ``rj`` crosses: those it spans when it spans two or more
    (a one-node job, or one within a switch, crosses none)."""
    nodes = rj.placement.nodes()
    if len(nodes) < 2:
        return []
    index, sid = layout.index, layout.switch_ids
    spanned = {sid[index[n]] for n in nodes if n in index} - {0}
    return list(spanned) if len(spanned) > 1 else []


def _loads(layout: NodeLayout, used_gpus: np.ndarray, crossing: np.ndarray,
           names: set[str] | None = None) -> dict[str, SwitchLoad]:
    n_ids = len(layout.switch_names)
    cap = layout.capacity[:, 1].astype(np.float64)
    total = np.bincount(layout.switch_id, weights=cap, minlength=n_ids)
    busy = np.minimum(np.bincount(layout.switch_id, weights=used_gpus, minlength=n_ids), total)
    return {name: SwitchLoad(name, float(busy[i] / total[i]) if total[i] > 0 else 0.0, int(crossing[i]))
            for i, name in enumerate(layout.switch_names)
            if name is not None and (names is None or name in names)}
