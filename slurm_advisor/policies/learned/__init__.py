"""The learned policy: the network placing a job's tasks one at a time (``agent``), the per-node
rows it sees (``node_features``), its large-cluster fast path (``fast``) and the loading of a
model directory as the registry's `learned`, `learned-fast` and `search` (``adapter``)."""
