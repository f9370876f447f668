"""The legacy MLP speed model, fitted (``speed_model``), behind the SpeedModel and SpeedPredictor
interfaces: its features and its forward pass in numpy, so that serving needs no torch.

The shipped default model and models trained before the site speed model carry this kind.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import numpy as np

from slurm_advisor.domain import ClusterSnapshot, Job, Node, Placement, RunningJob, SpeedSample
from slurm_advisor.learned.features import FeatureSchema, NodeLoad, placement_vector, sample_vector
from slurm_advisor.learned.load_index import LoadIndex, others_rows
from slurm_advisor.learned.numpy_nets import Weights, arrays_of, mlp_forward, mlp_layers


def _features(subject: RunningJob, load: NodeLoad, switch_of, schema: FeatureSchema) -> np.ndarray:
    own = set(subject.placement.nodes())
    types: list[str] = []
    for node in own:
        types.extend(load.types.get(node, ()))
    for _ in subject.placement.tasks:  # drop the subject's own tasks from the histogram
        types.remove(subject.job.type)
    return sample_vector(subject, load, switch_of, schema, types)


def sample_features(sample: SpeedSample, schema: FeatureSchema) -> np.ndarray:
    load = NodeLoad(sample.nodes, (sample.subject, *sample.neighbours))
    return _features(sample.subject, load, {n.name: n.switch for n in sample.nodes}, schema)


class LearnedSpeedModel:
    """The fitted network behind the SpeedModel and SpeedPredictor interfaces."""

    name = "learned-speed"
    local = True

    def __init__(self, net: Weights, schema: FeatureSchema):
        """``net``: a fitted SpeedNet or its state_dict's arrays (copied: the net is fixed once fitted)."""
        state = arrays_of(net)
        self.schema = schema
        self._layers = mlp_layers(state, "body")
        self._lo, self._hi = float(state["log_lo"]), float(state["log_hi"])

    def speeds(self, nodes: Sequence[Node], running: Sequence[RunningJob],
               only: Collection[str] | None = None) -> dict[str, float]:
        targets = [rj for rj in running if only is None or rj.job.id in only]
        if not targets:
            return {}
        load = NodeLoad(nodes, running)
        switch_of = {n.name: n.switch for n in nodes}
        x = np.stack([_features(rj, load, switch_of, self.schema) for rj in targets])
        pred = np.exp(self._log_speeds(x)).tolist()
        return {rj.job.id: max(1e-9, s) for rj, s in zip(targets, pred)}

    def predict(self, snapshot: ClusterSnapshot, job: Job, placement: Placement) -> float:
        """The speed of ``job`` if it starts on ``placement`` now: O(nodes of the placement)."""
        return self.predict_after(snapshot, job, placement, ())

    def predict_after(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                      gone: Iterable[RunningJob]) -> float:
        """As ``predict`` once the running jobs ``gone`` have ended (only those on the placement's
        nodes matter; the snapshot's free capacity is not read)."""
        x = self.placement_features(snapshot, job, placement, gone)
        log_speed = float(self._log_speeds(x[None])[0])
        return max(1e-9, float(np.exp(log_speed)))

    def predict_many(self, snapshot: ClusterSnapshot, job: Job, placements: Sequence[Placement]) -> list[float]:
        """``predict`` of each placement, in one forward pass (a decision's evidence)."""
        if not placements:
            return []
        x = np.stack([self.placement_features(snapshot, job, p) for p in placements])
        return [max(1e-9, s) for s in np.exp(self._log_speeds(x).astype(np.float64)).tolist()]

    def placement_features(self, snapshot: ClusterSnapshot, job: Job, placement: Placement,
                           gone: Iterable[RunningJob] = ()) -> np.ndarray:
        """The features ``speeds`` computes for ``job`` on ``placement`` among the snapshot's
        running jobs (less ``gone``), from the cluster's LoadIndex: no pass over running jobs."""
        layout = snapshot.layout
        per_node = placement.role_counts()
        idx = np.fromiter((layout.index[n] for n in per_node), dtype=np.int64, count=len(per_node))
        with LoadIndex.synced(snapshot) as load:
            sums, type_counts = load.local(idx, gone)
            types = load.types
        hist = np.zeros(self.schema.n_types, dtype=np.float32)
        counts = type_counts.sum(0)
        for col in np.flatnonzero(counts).tolist():
            hist[self.schema.type_slot(types[col])] += np.float32(0.25 * counts[col])
        others = others_rows(sums, layout.capacity[idx])
        switches = len(np.unique(layout.switch_id[idx]))
        return placement_vector(job, per_node, switches, others, hist, self.schema)

    def mape(self, samples: Sequence[SpeedSample]) -> float:
        x = np.stack([sample_features(s, self.schema) for s in samples])
        true = np.exp(np.log([s.speed for s in samples]).astype(np.float32))  # as the fit's targets
        pred = np.exp(self._log_speeds(x))
        return float((np.abs(pred - true) / true).mean())

    def _log_speeds(self, x: np.ndarray) -> np.ndarray:
        return np.clip(mlp_forward(x, self._layers, relu_last=False)[:, 0], self._lo, self._hi)
