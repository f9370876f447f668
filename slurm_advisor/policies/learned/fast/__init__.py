"""The learned policy's large-cluster fast path, and its equivalence contract.

Above ``agent.FULL_SCORING_MAX_NODES`` nodes, greedy decisions (deployment) do not score every
node for every task: the cluster summary keeps the encodings of unchanged nodes and ignores
rank-only changes, the scoring head sees candidate nodes only (``agent._Summary``, the
incremental rows of ``node_features.IncrementalState``, ``whole_nodes``), and, for a network a
probe found to fill its nodes, one network step places a run of tasks (``runs``). The contract:
the same placements as scoring every node task by task wherever the network's choice is not a
near-tie that the stale ranks tip. Pinned by tests/policies/learned/test_scaling.py and
test_fast_selective.py: exact on a trained network that fills its nodes (tests/.../data) at 16,
48, 96, 64 and 1,000 nodes; with the shipped network 1 of 320 decisions differs; the run-by-run
path is exact wherever the probe lets it serve.
"""
