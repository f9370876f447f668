"""What is learned, and nothing that uses it: the networks, their inputs and their fit.

- ``speed/``: the site's speed model: ``vocab`` (the job types and nodes the samples show),
  ``features`` (a job's context: its layout, its co-runners, its racks), ``net`` (the ensemble's
  network, torch), ``fit`` (fitting it to logged speeds; ``SiteSpeedModel``, its torch twin),
  ``ensemble`` (``SiteEnsemble``: predictions, whatever computes the forward pass).
- ``policy/``: the placement network: ``features`` (the job's vector and the schema a model was
  trained with) and ``net`` (the actor-critic, torch).
- ``numpy_nets``: both networks' forward passes in numpy (serving needs no torch);
  ``hyper``: every hyperparameter of both and of their training.

Who uses them sits above: ``models`` (the model directory), ``policies`` (the learned policy,
the search and holding), ``training`` (the pipeline that fits both), ``experiments``.
torch is imported by ``speed.net``, ``speed.fit`` and ``policy.net`` only.
"""
