"""What Slurm would accept and do: the typed request of a submitted job (``request.py``), Slurm's
node choice (``cons_tres.py``), the layouts a pin can express (``expressible.py``), host lists
(``hostlist.py``), the submit marker (``marker.py``), and the release whose behaviour these model
(``release.py``: 22.05 unless the daemon read another at start). Pure, below the policies and the daemon:
the simulator, the daemon and the retrain import it from here."""
