"""What Slurm would accept and do: the typed request of a submitted job (``request.py``), Slurm's
node choice (``cons_tres.py``), the layouts a pin can express (``expressible.py``), host lists
(``hostlist.py``) and the submit marker (``marker.py``). Pure, below the policies and the daemon:
the simulator, the daemon and the retrain import it from here."""
