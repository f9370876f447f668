"""`slurm-advisor loop`: the learning loop end to end on a simulated site, through the real daemon.

``site`` is what Slurm would show the daemon (the cluster and the queue, kept by the loop),
``hook`` is job_submit.lua's part (the advise request per job, its reply back into a placement),
``timeline`` the jobs' speed reports, ``driver`` the cycles: run a trace through the daemon,
retrain, promote or not, next trace.
"""
