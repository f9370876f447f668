"""Training, one pipeline (``train.train``): fit the speed model, warm-start the policy by
imitation, distil the search (``distill``), fine-tune by actor-critic with replay (``rl``), pick
what to deploy by the gate under a judge fitted apart (``judge``, retrain's judge too), and save
the model directory (``checkpoint``). torch throughout."""
