"""The model directory's owner, importable without torch: meta.json (``meta``), the exported
numpy weights (``weights``) and the model as served (``served``). Training (``learned``) writes
the directory; the daemon, ``explain`` and the search only read it through here."""
