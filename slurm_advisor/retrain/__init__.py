"""`slurm-advisor retrain`: refit, fine-tune, judge against the active model, promote only if better.

The models directory's layout (versions, the ``active`` and ``canary`` pointers) is ``models.versions``;
``lock`` keeps two retrains apart, ``data`` turns the store into training data and a job mix,
``gate`` is the promotion decision (pure), ``evaluate`` scores candidate and active,
``retrain`` runs the whole thing, ``submit`` sends it to Slurm as a batch job.
"""
