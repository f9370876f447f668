"""slurm_advisor: learned placement of distributed ML training jobs on Slurm clusters."""

__version__ = "0.1.0"
