"""The model directory's owner, importable without torch.

- ``meta``: meta.json, read into a validated record in one place (and written by ``write``);
  ``DEFAULT_MODEL_DIR``, the packaged default model;
- ``weights``: the exported numpy weights (``weights.npz``) serving reads;
- ``served``: the model as the daemon serves it (numpy networks);
- ``versions``: a models directory of published versions, the version hash, the ``active`` and
  ``canary`` pointers;
- ``torch_files``: the .pt files read into torch networks (the one module here importing torch:
  training, and serving a model that has no weights.npz yet).

Training writes a directory (``training.checkpoint``); the daemon, ``explain``, retrain and the
policies read it through here.
"""
